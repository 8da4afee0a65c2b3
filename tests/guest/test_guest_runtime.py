# SPDX-License-Identifier: Apache-2.0
"""The machine view inside the microVM guest: the agent builds its sandboxes with the
namespace backend's own code (src/ns/ns-child.c, ns-proc.c), so the guest's sandbox
shows the same small machine as the host's, sized to the request (memory_mb) and the
VM (one vCPU), with the same entries masked. One VM, booted under TCG; the image comes
from the ctest fixture vm_image (HXS_VM_IMAGE). No time is asserted."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_agent_vm import vm  # noqa: E402,F401  (the fixture: one VM of the image)

MACHINE = r"""
import errno, json, os, socket, stat, subprocess
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
def run(*argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return [p.returncode, p.stdout]
r = {"memtotal": [l for l in open("/proc/meminfo") if l.startswith("MemTotal:")][0].split()[1],
     "cpus": sum(1 for l in open("/proc/cpuinfo") if l.startswith("processor")),
     "online": open("/sys/devices/system/cpu/online").read().strip(), "cpu_count": os.cpu_count(),
     "sys": sorted(os.listdir("/sys")), "uptime": float(open("/proc/uptime").read().split()[0]),
     "free": run("free", "-k"), "ps": run("ps", "-e", "-o", "pid="), "df": run("df", "/var/tmp"),
     "http": socket.getservbyname("http"), "var_tmp": oct(stat.S_IMODE(os.stat("/var/tmp").st_mode)),
     "proc_sys_ro": bool(os.statvfs("/proc/sys").f_flag & os.ST_RDONLY)}
for p in ("/proc/kallsyms", "/proc/kcore", "/proc/sysrq-trigger", "/proc/keys", "/dev/tty"):
    try:
        open(p, "rb").close(); r[p] = "opened"
    except OSError as e:
        r[p] = name(e)
m, s = os.openpty()
r["pty"] = os.ttyname(s)
print(json.dumps(r))
"""


def test_guest_sandbox_shows_a_small_machine_with_its_limits(vm):  # noqa: F811
    assert vm.hello().startswith("hexr-agent ")
    r = vm.run(MACHINE, memory_mb=200, timeout_ms=120000)
    assert r["error"] is None, r["error"]
    assert os.WIFEXITED(r["exit"]["wait_status"]) and os.WEXITSTATUS(r["exit"]["wait_status"]) == 0, r
    got = json.loads(r["stdout"].decode().strip().splitlines()[-1])
    assert got["memtotal"] == str(200 * 1024), got
    assert got["cpus"] == 1 and got["online"] == "0" and got["cpu_count"] == 1, got
    assert got["sys"] == ["devices"] and got["proc_sys_ro"] is True, got
    assert got["uptime"] >= 0, got
    assert got["free"][0] == 0 and got["ps"][0] == 0 and got["df"][0] == 0, got
    assert 1 <= len(got["ps"][1].split()) <= 4, got
    assert got["http"] == 80 and got["var_tmp"] == "0o1777", got
    for p in ("/proc/kallsyms", "/proc/kcore", "/proc/sysrq-trigger", "/proc/keys"):
        assert got[p] == "EACCES", got
    assert got["/dev/tty"] == "ENXIO" and got["pty"].startswith("/dev/pts/"), got
    assert vm.wait_exit(120) == 0
