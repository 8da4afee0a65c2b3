"""Hostile code, cross-sandbox: two sandboxes running at once share nothing.

For each language, one pair of concurrent requests goes through the service (warm and
cold; in warm mode both Python sandboxes are forked from the same template):

  victim    writes a secret to /tmp, $HOME and /dev/shm, listens on TCP and UDP
            127.0.0.1:PORT and on an abstract unix socket, creates SysV shared memory,
            a message queue and a semaphore set under KEY, then runs `sleep` under a
            marker name and waits for it;
  attacker  runs while the victim waits (the test sees the victim's marker process on
            the host, starts the attacker, and only then ends the victim's `sleep` with
            SIGTERM): it lists processes, signals every pid it can guess (including the
            victim's host pids and kill(-1)), reads the victim's files, connects to its
            sockets, looks up its SysV keys.

The victim then reports whether its files and IPC objects are intact, how many
connections and datagrams reached it, and how its `sleep` ended (the test's SIGTERM,
not someone's SIGKILL). The pair runs once per language and mode; each test checks
one aspect of the recorded run. Sockets, files and IPC objects need no cleanup: they
live in the sandboxes' own namespaces.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import uuid
from typing import Any, Dict

import pytest

from _service import LANGS, Result, errname, fill, kill_pid, marker, pids_with, wait_until

SERVICE_ENV = {"MAX_CONCURRENT": "3"}

VICTIM = {
    "python": r'''
import ctypes, json, os, socket, subprocess
M, S, PORT, ABS, KEY = @M@, @SECRET@, @PORT@, @ABS@, @KEY@
for d in ("/tmp", "/home/sandbox", "/dev/shm"):
    with open("%s/%s" % (d, M), "w") as f:
        f.write(S)
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.bind(("127.0.0.1", PORT)); tcp.listen(8); tcp.setblocking(False)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", PORT)); udp.setblocking(False)
un = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
un.bind("\0" + ABS); un.listen(8); un.setblocking(False)
libc = ctypes.CDLL(None, use_errno=True)
ipc = [libc.shmget(KEY, 4096, 0o1000 | 0o666), libc.msgget(KEY, 0o1000 | 0o666), libc.semget(KEY, 1, 0o1000 | 0o666)]
print(json.dumps({"ready": True, "ipc": ipc}), flush=True)
sleep = subprocess.run([M, "60"], executable="/bin/sleep")
def count(sock, kind):
    n = 0
    while True:
        try:
            if kind == "udp": sock.recv(100)
            else: sock.accept()[0].close()
            n += 1
        except OSError:
            return n
intact = True
for d in ("/tmp", "/home/sandbox", "/dev/shm"):
    with open("%s/%s" % (d, M)) as f:
        intact = intact and f.read() == S
ipc_after = [libc.shmget(KEY, 0, 0), libc.msgget(KEY, 0), libc.semget(KEY, 0, 0)]
print(json.dumps({"sleep": sleep.returncode, "intact": intact, "tcp": count(tcp, "tcp"), "udp": count(udp, "udp"),
                  "abstract": count(un, "unix"), "ipc_intact": ipc_after == ipc and min(ipc) >= 0}))
''',
    "javascript": r'''
const fs = require('fs'), net = require('net'), dgram = require('dgram'), { spawn } = require('child_process');
const M = @M@, S = @SECRET@, PORT = @PORT@, ABS = @ABS@;
for (const d of ['/tmp', '/home/sandbox', '/dev/shm']) fs.writeFileSync(d + '/' + M, S);
const got = { tcp: 0, udp: 0, abstract: 0 };
const tcp = net.createServer((c) => { got.tcp++; c.destroy(); });
const un = net.createServer((c) => { got.abstract++; c.destroy(); });
const udp = dgram.createSocket('udp4');
udp.on('message', () => { got.udp++; });
let pending = 3;
const ready = () => {
  if (--pending) return;
  console.log(JSON.stringify({ ready: true }));
  const sl = spawn('/bin/sleep', ['60'], { argv0: M, stdio: 'ignore' });
  sl.on('exit', (code, sig) => {
    setTimeout(() => {
      let intact = true;
      for (const d of ['/tmp', '/home/sandbox', '/dev/shm']) intact = intact && fs.readFileSync(d + '/' + M, 'utf8') === S;
      console.log(JSON.stringify({ sleep: sig ? -signalNumber(sig) : code, intact, ...got }));
      process.exit(0);
    }, 200);
  });
};
const signalNumber = (s) => require('os').constants.signals[s];
tcp.listen(PORT, '127.0.0.1', ready);
un.listen('\0' + ABS, ready);
udp.bind(PORT, '127.0.0.1', ready);
''',
    "bash": r'''
M=@M@; S=@SECRET@
for d in /tmp /home/sandbox /dev/shm; do printf '%s' "$S" > "$d/$M"; done
# the marker reaches perl through its environment: only `sleep` may carry it in its
# command line (the test finds the victim, and later ends it, by that marker)
M="$M" perl -MSocket -MIO::Socket::INET -MIO::Handle -e '
  my ($port, $abs, $key) = @ARGV; my $m = $ENV{M};
  my $tcp = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $port, Listen => 8, Blocking => 0) or die "tcp: $!";
  my $udp = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $port, Proto => "udp", Blocking => 0) or die "udp: $!";
  socket(my $un, AF_UNIX, SOCK_STREAM, 0) or die; bind($un, pack_sockaddr_un("\0$abs")) or die "bind: $!";
  listen($un, 8) or die; $un->blocking(0);
  my @ipc = (shmget($key, 4096, 01666), msgget($key, 01666), semget($key, 1, 01666));
  print "ready\t1\nipc\t", join(" ", map { defined $_ ? $_ : "undef:$!" } @ipc), "\n";
  STDOUT->flush;
  system { "/bin/sleep" } $m, "60";
  print "sleep\t", ($? & 127 ? -($? & 127) : $? >> 8), "\n";
  my ($t, $u, $a, $buf) = (0, 0, 0);
  $t++ while $tcp->accept;
  $u++ while defined $udp->recv($buf, 100);
  while (accept(my $c, $un)) { $a++ }
  my @after = (shmget($key, 0, 0), msgget($key, 0), semget($key, 0, 0));
  print "tcp\t$t\nudp\t$u\nabstract\t$a\n";
  print "ipc_intact\t", (join(" ", map { $_ // "undef" } @after) eq join(" ", @ipc) ? "true" : "false"), "\n";
' -- @PORT@ @ABS@ @KEY@
intact=true
for d in /tmp /home/sandbox /dev/shm; do [ "$(cat "$d/$M")" = "$S" ] || intact=false; done
printf 'intact\t%s\n' "$intact"
''',
}

ATTACKER = {
    "python": r'''
import ctypes, errno, json, os, signal, socket
M, S, PORT, ABS, KEY, VPIDS = @M@, @SECRET@, @PORT@, @ABS@, @KEY@, @VPIDS@
def en(e): return errno.errorcode.get(e.errno, str(e.errno))
res = {"me": os.getpid()}
cmds = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try: cmds.append(open("/proc/%s/cmdline" % p, "rb").read().decode(errors="replace"))
        except OSError: pass
res["procs"] = cmds
res["kill victim"] = {}
for v in VPIDS:
    try: os.kill(v, signal.SIGKILL); res["kill victim"][str(v)] = "ok"
    except OSError as e: res["kill victim"][str(v)] = en(e)
try: os.kill(-1, signal.SIGKILL); res["kill -1"] = "ok"
except OSError as e: res["kill -1"] = en(e)
hits = []
mine = {int(t) for t in os.listdir("/proc/self/task")}  # kill(tid) would end this process
for p in range(2, 1000):
    if p not in mine:
        try: os.kill(p, signal.SIGKILL); hits.append(p)
        except OSError: pass
res["kill guessed"] = hits
res["files"] = {}
for d in ("/tmp", "/home/sandbox", "/dev/shm"):
    try: res["files"][d] = "READ " + open("%s/%s" % (d, M)).read()
    except OSError as e: res["files"][d] = en(e)
    res["files"][d + " listing"] = os.listdir(d)
def connect(fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(5)
    try: s.connect(addr); return "CONNECTED"
    except OSError as e: return en(e)
    finally: s.close()
res["tcp"] = connect(socket.AF_INET, ("127.0.0.1", PORT))
res["abstract"] = connect(socket.AF_UNIX, "\0" + ABS)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    try: u.sendto(b"hxs-cross", ("127.0.0.1", PORT))
    except OSError: pass
own = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try: own.bind(("127.0.0.1", PORT)); res["bind same port"] = "ok"
except OSError as e: res["bind same port"] = en(e)
libc = ctypes.CDLL(None, use_errno=True)
res["ipc"] = {}
for name, call in (("shmget", lambda: libc.shmget(KEY, 0, 0)), ("msgget", lambda: libc.msgget(KEY, 0)),
                   ("semget", lambda: libc.semget(KEY, 0, 0))):
    r = call()
    res["ipc"][name] = "found %d" % r if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps(res))
''',
    "javascript": r'''
const fs = require('fs'), net = require('net'), dgram = require('dgram');
const M = @M@, S = @SECRET@, PORT = @PORT@, ABS = @ABS@, VPIDS = @VPIDS@;
const res = { me: process.pid, procs: [], 'kill victim': {}, files: {} };
for (const p of fs.readdirSync('/proc')) {
  if (/^\d+$/.test(p)) { try { res.procs.push(fs.readFileSync('/proc/' + p + '/cmdline', 'latin1')); } catch (e) {} }
}
for (const v of VPIDS) { try { process.kill(v, 'SIGKILL'); res['kill victim'][v] = 'ok'; } catch (e) { res['kill victim'][v] = e.code; } }
try { process.kill(-1, 'SIGKILL'); res['kill -1'] = 'ok'; } catch (e) { res['kill -1'] = e.code; }
res['kill guessed'] = [];
// node's own threads have pids of this namespace too, and kill(tid) ends the whole process
const own = new Set(fs.readdirSync('/proc/self/task').map(Number));
for (let p = 2; p < 1000; p++) {
  if (own.has(p)) continue;
  try { process.kill(p, 'SIGKILL'); res['kill guessed'].push(p); } catch (e) {}
}
for (const d of ['/tmp', '/home/sandbox', '/dev/shm']) {
  try { res.files[d] = 'READ ' + fs.readFileSync(d + '/' + M, 'utf8'); } catch (e) { res.files[d] = e.code; }
  res.files[d + ' listing'] = fs.readdirSync(d);
}
const connect = (opts) => new Promise((resolve) => {
  const c = net.connect(opts);
  c.setTimeout(5000, () => { c.destroy(); resolve('TIMEOUT'); });
  c.on('connect', () => { c.destroy(); resolve('CONNECTED'); });
  c.on('error', (e) => resolve(e.code));
});
(async () => {
  res.tcp = await connect({ host: '127.0.0.1', port: PORT });
  res.abstract = await connect({ path: '\0' + ABS });
  const u = dgram.createSocket('udp4');
  u.on('error', () => {});
  for (let i = 0; i < 3; i++) await new Promise((ok) => u.send('hxs-cross', PORT, '127.0.0.1', () => ok()));
  u.close();
  const srv = net.createServer();
  res['bind same port'] = await new Promise((ok) => { srv.on('error', (e) => ok(e.code)); srv.listen(PORT, '127.0.0.1', () => ok('ok')); });
  srv.close();
  console.log(JSON.stringify(res));
})();
''',
    "bash": r'''
M=@M@; PORT=@PORT@
printf 'me\t%s\n' "$$"
for d in /proc/[0-9]*; do printf 'proc\t%s\n' "$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"; done
for v in @VPIDS@; do
  if msg=$(kill -9 "$v" 2>&1); then printf 'kill\t%s\tok\n' "$v"; else printf 'kill\t%s\t%s\n' "$v" "$msg"; fi
done
# in this shell, not in a $( ) subshell: kill(-1) spares only its caller
if kill -9 -1 2>/tmp/kill.err; then printf 'kill -1\tok\n'; else printf 'kill -1\t%s\n' "$(cat /tmp/kill.err)"; fi
rm -f /tmp/kill.err
hits=
for ((p = 2; p < 1000; p++)); do [ $p = $$ ] && continue; kill -9 $p 2>/dev/null && hits="$hits $p"; done
printf 'kill guessed\t%s\n' "$hits"
for d in /tmp /home/sandbox /dev/shm; do
  # (the error message without the path: the marker in the output would mean "seen")
  if out=$(cat "$d/$M" 2>&1); then printf 'file\t%s\tREAD %s\n' "$d" "$out"; else printf 'file\t%s\t%s\n' "$d" "${out//"$d/$M"/PATH}"; fi
  printf 'listing\t%s\t%s\n' "$d" "$(ls -A "$d" | tr '\n' ' ')"
done
if msg=$( { exec 3<>/dev/tcp/127.0.0.1/$PORT; } 2>&1 ); then printf 'tcp\tCONNECTED\n'; else printf 'tcp\t%s\n' "$msg"; fi
for i in 1 2 3; do echo hxs-cross > /dev/udp/127.0.0.1/$PORT 2>/dev/null; done
perl -MSocket -e '
  my ($abs, $port, $key) = @ARGV;
  socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die;
  print "abstract\t", (connect($s, pack_sockaddr_un("\0$abs")) ? "CONNECTED" : $! + 0), "\n";
  socket(my $t, AF_INET, SOCK_STREAM, 0) or die;
  print "bind same port\t", (bind($t, pack_sockaddr_in($port, inet_aton("127.0.0.1"))) ? "ok" : $! + 0), "\n";
  for my $c (["shmget", sub { shmget($key, 0, 0) }], ["msgget", sub { msgget($key, 0) }], ["semget", sub { semget($key, 0, 0) }]) {
    my $r = $c->[1]->();
    print "ipc\t$c->[0]\t", (defined $r ? "found $r" : $! + 0), "\n";
  }
' -- @ABS@ "$PORT" @KEY@
''',
}


def perl_errno(v: str) -> str:
    import errno
    v = v.strip()
    return errno.errorcode.get(int(v), v) if v.isdigit() else v


def parse_attacker(res: Result, lang: str) -> Dict[str, Any]:
    if lang != "bash":
        return res.json()
    t = res.tabs()
    out: Dict[str, Any] = {"me": int(t["me"]), "procs": res.tab_list("proc"), "kill victim": {},
                           "files": {}, "ipc": {}}
    for row in res.tab_list("kill"):
        pid, _, msg = row.partition("\t")
        out["kill victim"][pid] = msg if msg == "ok" else errname(msg)
    out["kill -1"] = t["kill -1"] if t["kill -1"] == "ok" else errname(t["kill -1"])
    out["kill guessed"] = [int(p) for p in t["kill guessed"].split()]
    for row in res.tab_list("file"):
        d, _, v = row.partition("\t")
        out["files"][d] = v if v.startswith("READ") else errname(v)
    for row in res.tab_list("listing"):
        d, _, v = row.partition("\t")
        out["files"][d + " listing"] = v.split()
    out["tcp"] = errname(t["tcp"]) if t["tcp"] != "CONNECTED" else "CONNECTED"
    out["abstract"] = perl_errno(t["abstract"])
    out["bind same port"] = perl_errno(t["bind same port"])
    for row in res.tab_list("ipc"):
        name, _, v = row.partition("\t")
        out["ipc"][name] = perl_errno(v)
    return out


def parse_victim(res: Result, lang: str) -> Dict[str, Any]:
    if lang != "bash":
        return res.json()
    t = res.tabs()
    return {"sleep": int(t["sleep"]), "intact": t["intact"] == "true", "tcp": int(t["tcp"]),
            "udp": int(t["udp"]), "abstract": int(t["abstract"]), "ipc_intact": t["ipc_intact"] == "true",
            "ipc": t.get("ipc", "")}


def run_pair(svc, lang: str) -> Dict[str, Any]:
    """Runs the victim/attacker pair once per (service, language) and caches it."""
    cache = svc.__dict__.setdefault("_cross_pairs", {})
    if lang in cache:
        return cache[lang]
    m = marker("hxs-cross-")
    values = dict(M=m, SECRET="hxs-cross-secret-" + uuid.uuid4().hex, PORT=random.randint(20000, 60000),
                  ABS="hxs-cross-" + uuid.uuid4().hex[:12], KEY=random.randint(1 << 20, 1 << 30))
    box: Dict[str, Result] = {}
    victim_code = fill(VICTIM[lang], lang, **values)
    t = threading.Thread(target=lambda: box.setdefault("victim", svc.run(victim_code, lang, timeout=30)),
                         daemon=True)
    t.start()
    sleeper = []
    try:
        sleeper = wait_until(lambda: pids_with(m) or not t.is_alive(), 60.0)
        sleeper = sleeper if isinstance(sleeper, list) else []
        assert sleeper, "the victim did not start (no %s process on the host)" % m
        vpids = list(sleeper)
        for pid in sleeper:  # the victim program itself, by its host pid
            try:
                with open("/proc/%d/status" % pid) as f:
                    vpids += [int(line.split()[1]) for line in f if line.startswith("PPid:")]
            except OSError:
                pass
        attacker = svc.run(fill(ATTACKER[lang], lang, VPIDS=vpids, **values), lang, timeout=30)
        victim_alive = bool(pids_with(m))
    finally:
        for pid in sleeper:
            kill_pid(pid, signal.SIGTERM)
        t.join(timeout=120)
    victim = box.get("victim")
    assert victim is not None, "the victim's request did not return"
    pair = {"values": values, "vpids": vpids, "attacker": attacker, "victim": victim,
            "victim_alive": victim_alive}
    assert victim_alive, "the victim ended before the attacker finished (inconclusive): %s" % victim.describe()
    assert attacker.exit_code == 0, attacker.describe()
    assert victim.exit_code == 0, "the victim was disturbed: " + victim.describe()
    pair["a"] = parse_attacker(attacker, lang)
    pair["v"] = parse_victim(victim, lang)
    assert values["SECRET"] not in attacker.out + attacker.err, "the attacker saw the victim's secret: " + \
        attacker.describe()
    cache[lang] = pair
    return pair


@pytest.mark.parametrize("lang", LANGS)
def test_other_sandboxes_processes_are_invisible(svc, lang: str) -> None:
    p = run_pair(svc, lang)
    procs = p["a"]["procs"]
    assert not [c for c in procs if p["values"]["M"] in c], "the attacker sees the victim: %s" % procs
    assert 1 <= len(procs) <= 4, "the attacker sees more than itself: %s" % procs


@pytest.mark.parametrize("lang", LANGS)
def test_other_sandboxes_cannot_be_signalled(svc, lang: str) -> None:
    p = run_pair(svc, lang)
    a, v = p["a"], p["v"]
    assert a["kill victim"] and set(a["kill victim"].values()) == {"ESRCH"}, \
        "signalling the victim's host pids %s: %s" % (p["vpids"], a["kill victim"])
    assert a["kill guessed"] == [], "pids 2..999 the attacker could signal: %s" % a["kill guessed"]
    assert a["kill -1"] in ("ESRCH", "ok"), a  # ok: nothing but itself... which kill(-1) skips
    # the victim's sleep ended by the test's SIGTERM, not by the attacker's SIGKILL
    assert v["sleep"] == -signal.SIGTERM, "the victim's sleep ended with %s: %s" % (v["sleep"], p["victim"].describe())


@pytest.mark.parametrize("lang", LANGS)
def test_other_sandboxes_files_are_invisible(svc, lang: str) -> None:
    p = run_pair(svc, lang)
    files = p["a"]["files"]
    for d in ("/tmp", "/home/sandbox", "/dev/shm"):
        assert files[d] == "ENOENT", "the victim's %s file from the attacker: %s" % (d, files[d])
        assert files[d + " listing"] == [], "the attacker's %s is not empty: %s" % (d, files)
    assert p["v"]["intact"] is True, p["victim"].describe()


@pytest.mark.parametrize("lang", LANGS)
def test_other_sandboxes_sockets_are_unreachable(svc, lang: str) -> None:
    p = run_pair(svc, lang)
    a, v = p["a"], p["v"]
    assert a["tcp"] == "ECONNREFUSED" and a["abstract"] == "ECONNREFUSED", a
    assert a["bind same port"] == "ok", "the attacker cannot bind the victim's port: shared network? %s" % a
    assert (v["tcp"], v["udp"], v["abstract"]) == (0, 0, 0), "connections reached the victim: %s" % v


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_sysv_ipc_keys_are_per_sandbox(svc, lang: str) -> None:
    p = run_pair(svc, lang)
    ipc = p["a"]["ipc"]
    assert ipc == {"shmget": "ENOENT", "msgget": "ENOENT", "semget": "ENOENT"}, \
        "the victim's SysV objects (key %d) from the attacker: %s" % (p["values"]["KEY"], ipc)
    assert p["v"]["ipc_intact"] is True, p["victim"].describe()


@pytest.mark.parametrize("lang", LANGS)
def test_concurrent_sandboxes_keep_their_own_results(svc, lang: str) -> None:
    p = run_pair(svc, lang)
    victim, attacker = p["victim"], p["attacker"]
    assert victim.exit_code == 0 and attacker.exit_code == 0
    assert "hxs-cross" not in victim.err and not victim.err.strip(), victim.describe()
    assert p["values"]["M"] not in attacker.out, attacker.describe()
    first = victim.out.splitlines()[0] if victim.out else ""
    assert first == "ready\t1" if lang == "bash" else json.loads(first)["ready"] is True, victim.describe()
