# SPDX-License-Identifier: Apache-2.0
"""Boots the guest image under QEMU (TCG) and speaks the agent protocol to it.

A small, independent implementation of the host side of src/proto/proto.h (frames,
TLVs), so that the agent is tested against the written contract rather than against
the C host driver."""

import os
import re
import select
import signal
import socket
import struct
import subprocess
import time

MAGIC, VERSION = 0x48, 2
(HELLO, READY, RUN, CODE, STDIN, START, STDOUT, STDERR, EXIT, ERROR, KILL,
 FILE, FILE_DATA, FILE_OUT) = range(1, 15)
RUN_TAGS = dict(language=1, timeout_ms=2, memory_mb=3, pids_max=4, nofile=5, tmpfs_mb=6,
                output_max=7, code_len=8, stdin_len=9)
RUN_ENV = 10
RUN_FILES, RUN_FILES_BYTES, RUN_RETURN_GLOB, RUN_RETURN_FILES, RUN_RETURN_BYTES = range(11, 16)
FILE_PATH, FILE_SIZE, FILE_TRUNCATED, FILE_LEN = range(1, 5)
EXIT_TAGS = {1: "wait_status", 2: "timed_out", 3: "oom_killed", 4: "time_ms", 5: "memory_kb"}
LANGS = {"python": 0, "javascript": 1, "bash": 2}
QEMU = "qemu-system-x86_64"
PORT_NAME = "org.hexr.agent.0"


def frame(ftype, payload=b""):
    return struct.pack("<BBBBI", MAGIC, VERSION, ftype, 0, len(payload)) + payload


def tlv(tag, value):
    return struct.pack("<HI", tag, len(value)) + value


def run_payload(code, language="python", timeout_ms=30000, memory_mb=256, pids_max=256,
                nofile=1024, tmpfs_mb=64, output_max=1 << 20, stdin=b"", env=None, files=(),
                return_globs=(), return_files=100, return_bytes=32 << 20):
    env = env if env is not None else ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sandbox",
                                       "LANG=C.UTF-8"]
    fields = dict(language=LANGS[language], timeout_ms=timeout_ms, memory_mb=memory_mb,
                  pids_max=pids_max, nofile=nofile, tmpfs_mb=tmpfs_mb, output_max=output_max,
                  code_len=len(code), stdin_len=len(stdin))
    p = b"".join(tlv(RUN_TAGS[k], struct.pack("<I", v)) for k, v in fields.items())
    p += b"".join(tlv(RUN_ENV, e.encode() if isinstance(e, str) else e) for e in env)
    p += tlv(RUN_FILES, struct.pack("<I", len(files)))
    p += tlv(RUN_FILES_BYTES, struct.pack("<Q", sum(len(d) for _, d in files)))
    p += tlv(RUN_RETURN_FILES, struct.pack("<I", return_files))
    p += tlv(RUN_RETURN_BYTES, struct.pack("<Q", return_bytes))
    p += b"".join(tlv(RUN_RETURN_GLOB, g.encode()) for g in return_globs)
    return p


def file_frames(path, data):
    """A file in: FILE (path, size), then its bytes in FILE_DATA frames."""
    out = frame(FILE, tlv(FILE_PATH, path.encode()) + tlv(FILE_SIZE, struct.pack("<Q", len(data))))
    for i in range(0, len(data), 65536):
        out += frame(FILE_DATA, data[i:i + 65536])
    return out


def decode_file(payload):
    res, off = {}, 0
    while off < len(payload):
        tag, length = struct.unpack_from("<HI", payload, off)
        value = payload[off + 6:off + 6 + length]
        off += 6 + length
        if tag == FILE_PATH:
            res["path"] = value.decode()
        elif tag in (FILE_SIZE, FILE_LEN):
            res["size" if tag == FILE_SIZE else "len"] = struct.unpack("<Q", value)[0]
        elif tag == FILE_TRUNCATED:
            res["truncated"] = struct.unpack("<I", value)[0]
    return res


def host_khz():
    with open("/proc/cpuinfo") as f:
        m = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", f.read(), re.M)
    return int(float(m.group(1)) * 1000) if m else 2000000


def qemu_cmd(image, fd, memory_mb=512, accel="tcg", path=None):
    """fd: one end of a socketpair; or path: a unix socket QEMU listens on, so that
    the host can disconnect and connect again."""
    append = (f"console=ttyS0 tsc_early_khz={host_khz()} tsc=reliable quiet cryptomgr.notests "
              f"8250.nr_uarts=1 audit=0 panic=-1 reboot=t hexr.port={PORT_NAME}")
    return [QEMU, "-M", "microvm", "-accel", accel, "-cpu", "max" if accel == "tcg" else "host",
            "-m", str(memory_mb), "-smp", "1", "-nodefaults", "-no-user-config", "-nographic",
            "-no-reboot", "-kernel", os.path.join(image, "vmlinux"),
            "-initrd", os.path.join(image, "initramfs.img"), "-append", append,
            "-serial", "stdio",
            "-drive", f"if=none,id=root,file={os.path.join(image, 'rootfs.ext4')},format=raw,readonly=on",
            "-device", "virtio-blk-device,drive=root",
            "-device", "virtio-serial-device",
            "-chardev", f"socket,id=agent,path={path},server=on,wait=off" if path
            else f"socket,id=agent,fd={fd}",
            "-device", f"virtserialport,chardev=agent,name={PORT_NAME}"]


class VM:
    """One QEMU with the agent on the other end of a socketpair. Always close()."""

    def __init__(self, image, memory_mb=512, path=None):
        self.buf = b""
        self.console_text = b""
        self.path = path
        if path:
            self.host = None
            cmd, fds = qemu_cmd(image, None, memory_mb, path=path), []
        else:
            self.host, guest = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            cmd, fds = qemu_cmd(image, guest.fileno(), memory_mb), [guest.fileno()]
        self.proc = subprocess.Popen(cmd, pass_fds=fds, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        if not path:
            guest.close()

    def connect(self, timeout=30):
        """Path mode: (re)connect to QEMU's socket."""
        if self.host:
            self.host.close()
        self.buf = b""
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
                self.host = s
                return
            except OSError:
                s.close()
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.05)

    def disconnect(self):
        self.host.close()
        self.host = None

    def send(self, data):
        self.host.sendall(data)

    def _fill(self, deadline):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer from the agent; console: {self.console_tail()}")
            r, _, _ = select.select([self.host, self.proc.stdout], [], [], min(left, 1.0))
            if self.proc.poll() is not None and self.host not in r:
                raise EOFError(f"QEMU exited ({self.proc.returncode}); console: {self.console_tail()}")
            if self.proc.stdout in r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if chunk:
                    self.console_text = (self.console_text + chunk)[-16384:]
            if self.host in r:
                chunk = self.host.recv(1 << 20)
                if not chunk:
                    raise EOFError(f"the VM closed the channel; console: {self.console_tail()}")
                self.buf += chunk
                return

    def console_tail(self):
        return self.console_text.decode(errors="replace")[-2000:]

    def recv_frame(self, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 8:
                magic, version, ftype, flags, length = struct.unpack_from("<BBBBI", self.buf)
                assert (magic, version, flags) == (MAGIC, VERSION, 0), f"bad frame from the agent: {self.buf[:16]!r}"
                if len(self.buf) >= 8 + length:
                    payload = self.buf[8:8 + length]
                    self.buf = self.buf[8 + length:]
                    return ftype, payload
            self._fill(deadline)

    def hello(self, nonce=0x12345678, timeout=120):
        self.send(frame(HELLO, struct.pack("<I", nonce)))
        ftype, payload = self.recv_frame(timeout)
        assert ftype == READY, (ftype, payload)
        assert struct.unpack_from("<I", payload)[0] == nonce
        return payload[4:].decode()

    def start(self, code, stdin=b"", files=(), **kw):
        """files: (path, bytes) pairs, sent before START."""
        code = code.encode() if isinstance(code, str) else code
        self.send(frame(RUN, run_payload(code, stdin=stdin, files=files, **kw)))
        for i in range(0, len(code), 65536):
            self.send(frame(CODE, code[i:i + 65536]))
        for i in range(0, len(stdin), 65536):
            self.send(frame(STDIN, stdin[i:i + 65536]))
        self.send(frame(STDIN))
        for path, data in files:
            self.send(file_frames(path, data))
        self.send(frame(START))

    def collect(self, timeout=180):
        """Frames until EXIT or ERROR: {'stdout', 'stderr', 'exit' dict or None, 'error',
        'files': [FILE_OUT dict with 'data']}."""
        out = {"stdout": b"", "stderr": b"", "exit": None, "error": None, "files": []}
        while True:
            ftype, payload = self.recv_frame(timeout)
            if ftype == FILE_OUT:
                out["files"].append(dict(decode_file(payload), data=b""))
            elif ftype == FILE_DATA:
                out["files"][-1]["data"] += payload
            elif ftype == STDOUT:
                out["stdout"] += payload
            elif ftype == STDERR:
                out["stderr"] += payload
            elif ftype == EXIT:
                out["exit"] = decode_exit(payload)
                return out
            elif ftype == ERROR:
                out["error"] = payload.decode(errors="replace")
                return out
            else:
                raise AssertionError(f"unexpected frame type {ftype} from the agent")

    def run(self, code, **kw):
        self.start(code, **kw)
        return self.collect()

    def wait_exit(self, timeout=60):
        """The VM powers itself off after one execution."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.proc.stdout.close()
        if self.host:
            self.host.close()


def decode_exit(payload):
    res, off = {}, 0
    while off < len(payload):
        tag, length = struct.unpack_from("<HI", payload, off)
        value = payload[off + 6:off + 6 + length]
        off += 6 + length
        if tag in EXIT_TAGS:
            res[EXIT_TAGS[tag]] = struct.unpack("<I", value)[0]
    return res
