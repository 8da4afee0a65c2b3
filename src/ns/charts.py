# hexr-sandbox: charts without changing the code. Python programs in a sandbox get this
# as their sitecustomize (and warm templates run it for each program): when, and only
# when, matplotlib.pyplot is imported, its show() saves every open figure as
# /home/sandbox/output/figure-N.png (N from 1, in the order saved) and closes it, and
# the figures still open at exit are saved the same way. Until then it costs one entry
# in sys.meta_path.
import sys


def _hxs_charts_install(_sys=sys):
    class _HxsPyplotHook:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "matplotlib.pyplot":
                return None
            try:
                _sys.meta_path.remove(_HxsPyplotHook)
            except ValueError:
                pass
            import importlib.util

            spec = importlib.util.find_spec(name)
            loader = getattr(spec, "loader", None)
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            run = loader.exec_module

            def exec_module(module):
                run(module)
                _hxs_patch(module)

            loader.exec_module = exec_module
            return spec

    def _hxs_patch(plt):
        import atexit
        import os

        out = "/home/sandbox/output"
        state = {"n": 0}

        def save_all():
            for num in list(plt.get_fignums()):
                fig = plt.figure(num)
                os.makedirs(out, exist_ok=True)
                state["n"] += 1
                while os.path.exists(os.path.join(out, "figure-%d.png" % state["n"])):
                    state["n"] += 1
                fig.savefig(os.path.join(out, "figure-%d.png" % state["n"]))
                plt.close(fig)

        def show(*args, **kwargs):
            save_all()

        def at_exit():
            try:
                save_all()
            except Exception as e:  # a chart that cannot be drawn must not hide the program's end
                print("hexr-sandbox: could not save a figure: %s" % e, file=_sys.stderr)

        show.__doc__ = plt.show.__doc__
        plt.show = show
        atexit.register(at_exit)

    if "matplotlib.pyplot" in _sys.modules:
        _hxs_patch(_sys.modules["matplotlib.pyplot"])
    elif _HxsPyplotHook not in _sys.meta_path:
        _sys.meta_path.insert(0, _HxsPyplotHook)


_hxs_charts_install()
del _hxs_charts_install
