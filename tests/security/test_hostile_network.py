"""Hostile code, network: nothing but the sandbox's own loopback is reachable.

Every attack goes through the service, warm and cold (fixture `svc`), in every
language where it applies. The only targets are listeners this test opened on
127.0.0.1 or in the abstract unix namespace, and the service's own TCP port and unix
socket; nothing else is ever contacted, and no name other than "localhost" (answered
by the sandbox's /etc/hosts) is resolved. Each test checks on the host that nothing
arrived, and conftest.py that the service is unaffected afterwards.

Raw and packet sockets need a raw socket interface: Python and Bash (perl) only.
"""

from __future__ import annotations

import errno
import socket
from typing import Iterator

import pytest

from _service import (LANGS, drain_tcp, drain_udp, errname, fill, host_abstract_listener,
                      host_listener_tcp, host_listener_udp, marker)


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    s = host_listener_tcp()
    yield s
    s.close()


@pytest.fixture
def udp_listener() -> Iterator[socket.socket]:
    s = host_listener_udp()
    yield s
    s.close()


def perl_errno(v: str) -> str:
    v = v.strip()
    return errno.errorcode.get(int(v), v) if v.isdigit() else v


TCP_CODE = {
    "python": r'''
import errno, json, socket
def connect(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port)); return "CONNECTED"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
    finally:
        s.close()
res = {"host": connect(@PORT@)}
# the same port on the sandbox's own loopback: free, and reachable from inside
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    srv.bind(("127.0.0.1", @PORT@)); srv.listen(1); res["own"] = connect(@PORT@)
except OSError as e:
    res["own"] = "bind " + errno.errorcode.get(e.errno, str(e))
res["host again"] = connect(@PORT@ + 1 if @PORT@ < 65535 else 1024)
print(json.dumps(res))
''',
    "javascript": r'''
const net = require('net');
const connect = (port) => new Promise((resolve) => {
  const c = net.connect({ host: '127.0.0.1', port });
  c.setTimeout(5000, () => { c.destroy(); resolve('TIMEOUT'); });
  c.on('connect', () => { c.destroy(); resolve('CONNECTED'); });
  c.on('error', (e) => resolve(e.code));
});
(async () => {
  const res = { host: await connect(@PORT@) };
  const srv = net.createServer((s) => s.destroy());
  await new Promise((ok) => { srv.on('error', (e) => { res.own = 'bind ' + e.code; ok(); }); srv.listen(@PORT@, '127.0.0.1', ok); });
  if (!res.own) res.own = await connect(@PORT@);
  srv.close();
  console.log(JSON.stringify(res));
})();
''',
    "bash": r'''
if msg=$( { exec 3<>/dev/tcp/127.0.0.1/@PORT@; } 2>&1 ); then echo "host	CONNECTED"; else echo "host	$msg"; fi
out=$(curl -sS --max-time 5 http://127.0.0.1:@PORT@/ 2>&1); echo "curl	$? $out"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_tcp_to_a_host_loopback_listener_is_refused(svc, lang: str, tcp_listener: socket.socket) -> None:
    port = tcp_listener.getsockname()[1]
    res = svc.run(fill(TCP_CODE[lang], lang, PORT=port), lang)
    assert res.exit_code == 0, res.describe()
    got = res.data
    assert errname(got["host"]) == "ECONNREFUSED", "connecting to the host's 127.0.0.1:%d: %s" % (port, got)
    if lang == "bash":
        assert got["curl"].startswith("7 "), got  # curl: couldn't connect
    else:  # the sandbox has a working loopback of its own, where the port is free
        assert got["own"] == "CONNECTED", got
    assert not drain_tcp(tcp_listener), "a connection from the sandbox reached the host listener"


SERVICE_PORT_CODE = {
    "python": r'''
import errno, http.client, json, socket
res = {}
try:
    c = http.client.HTTPConnection("127.0.0.1", @PORT@, timeout=5)
    c.request("POST", "/api/v1/exec", body='{"code": "echo escaped", "language": "bash"}',
              headers={"Content-Type": "application/json"})
    res["http"] = "ANSWERED %d %s" % (c.getresponse().status, "")
except OSError as e:
    res["http"] = errno.errorcode.get(e.errno, str(e))
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(("::ffff:127.0.0.1", @PORT@)); res["v4mapped"] = "CONNECTED"
except OSError as e:
    res["v4mapped"] = errno.errorcode.get(e.errno, str(e))
print(json.dumps(res))
''',
    "javascript": r'''
const http = require('http');
const req = http.request({ host: '127.0.0.1', port: @PORT@, path: '/api/v1/exec', method: 'POST',
  headers: { 'Content-Type': 'application/json' }, timeout: 5000 }, (r) => {
  console.log(JSON.stringify({ http: 'ANSWERED ' + r.statusCode })); r.resume();
});
req.on('error', (e) => console.log(JSON.stringify({ http: e.code })));
req.on('timeout', () => { req.destroy(); });
req.end('{"code": "echo escaped", "language": "bash"}');
''',
    "bash": r'''
out=$(curl -sS --max-time 5 -H 'Content-Type: application/json' -d '{"code": "echo escaped", "language": "bash"}' http://127.0.0.1:@PORT@/api/v1/exec 2>&1)
echo "http	$? $out"
if msg=$( { exec 3<>/dev/tcp/127.0.0.1/@PORT@; } 2>&1 ); then echo "tcp	CONNECTED"; else echo "tcp	$msg"; fi
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_the_service_port_is_unreachable(svc, lang: str) -> None:
    """The sandbox cannot reach the service that runs it (and so cannot start
    sandboxes of its own, or read other requests)."""
    res = svc.run(fill(SERVICE_PORT_CODE[lang], lang, PORT=svc.port), lang)
    assert res.exit_code == 0, res.describe()
    assert "escaped" not in res.out, res.describe()
    got = res.data
    if lang == "bash":
        assert got["http"].startswith("7 "), got
        assert errname(got["tcp"]) == "ECONNREFUSED", got
    else:
        assert got["http"] == "ECONNREFUSED", "the service's port %d: %s" % (svc.port, got)
        if lang == "python":
            assert got["v4mapped"] in ("ECONNREFUSED", "ENETUNREACH"), got


UDP_CODE = {
    "python": r'''
import errno, json, socket
res = []
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(5):
    try:
        s.sendto(b"hxs-udp-%d" % i, ("127.0.0.1", @PORT@)); res.append("sent")
    except OSError as e:
        res.append(errno.errorcode.get(e.errno, str(e)))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.connect(("127.0.0.1", @PORT@))
c.settimeout(2)
try:
    c.send(b"hxs-udp-connected"); c.recv(100); res.append("answered")
except OSError as e:
    res.append(errno.errorcode.get(e.errno, str(e)) if e.errno else "timeout")
print(json.dumps({"sends": res}))
''',
    "javascript": r'''
const dgram = require('dgram');
const s = dgram.createSocket('udp4');
const res = [];
let n = 0;
const next = () => {
  if (n === 5) { s.close(); console.log(JSON.stringify({ sends: res })); return; }
  s.send(Buffer.from('hxs-udp-' + n++), @PORT@, '127.0.0.1', (e) => { res.push(e ? e.code : 'sent'); next(); });
};
s.on('error', (e) => res.push(e.code));
next();
''',
    "bash": r'''
for i in 1 2 3 4 5; do
  if msg=$( { echo "hxs-udp-$i" > /dev/udp/127.0.0.1/@PORT@; } 2>&1 ); then echo "send	sent"; else echo "send	$msg"; fi
done
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_udp_to_a_host_loopback_socket_never_arrives(svc, lang: str, udp_listener: socket.socket) -> None:
    port = udp_listener.getsockname()[1]
    res = svc.run(fill(UDP_CODE[lang], lang, PORT=port), lang)
    assert res.exit_code == 0, res.describe()
    sends = res.tab_list("send") if lang == "bash" else res.json()["sends"]
    assert len(sends) >= 5, res.describe()
    # the sandbox's own loopback answers "port unreachable": ECONNREFUSED on a later send
    assert all(s in ("sent", "answered") or errname(s) == "ECONNREFUSED" for s in sends), sends
    assert "answered" not in sends, sends
    got = drain_udp(udp_listener)
    assert not got, "datagrams from the sandbox reached the host: %s" % got


# A DNS query for "localhost" (id 0x4858), as a stub resolver would send it.
DNS_QUERY_HEX = "485801000001000000000000096c6f63616c686f73740000010001"
DNS_CODE = {
    "python": r'''
import json, socket
res = {"getaddrinfo": sorted({ai[4][0] for ai in socket.getaddrinfo("localhost", 80, proto=socket.IPPROTO_TCP)}),
       "gethostbyname": socket.gethostbyname("localhost"), "hostname": socket.gethostname()}
res["hostname addr"] = socket.gethostbyname(socket.gethostname())
with open("/etc/resolv.conf") as f:
    res["resolv.conf"] = f.read()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
s.sendto(bytes.fromhex(@QUERY@), ("127.0.0.1", @PORT@))
try:
    s.recvfrom(512); res["answer"] = "ANSWERED"
except OSError as e:
    res["answer"] = "none (%s)" % type(e).__name__
print(json.dumps(res))
''',
    "javascript": r'''
const dns = require('dns'), dgram = require('dgram'), fs = require('fs'), os = require('os');
dns.lookup('localhost', { all: true }, (err, addrs) => {
  const res = { getaddrinfo: err ? [err.code] : [...new Set(addrs.map((a) => a.address))].sort(),
                hostname: os.hostname(), 'resolv.conf': fs.readFileSync('/etc/resolv.conf', 'utf8') };
  const s = dgram.createSocket('udp4');
  s.on('error', () => {});
  s.on('message', () => { res.answer = 'ANSWERED'; });
  s.send(Buffer.from(@QUERY@, 'hex'), @PORT@, '127.0.0.1', () => {
    setTimeout(() => { if (!res.answer) res.answer = 'none'; s.close(); console.log(JSON.stringify(res)); }, 1000);
  });
});
''',
    "bash": r'''
getent ahosts localhost | awk '{print "addr\t" $1}' | sort -u
printf 'hostname\t%s\n' "$(hostname)"
printf 'hostname addr\t%s\n' "$(getent hosts "$(hostname)" | awk '{print $1}')"
grep -c nameserver /etc/resolv.conf | sed 's/^/nameservers\t/'
printf @QUERY_ESC@ > /dev/udp/127.0.0.1/@PORT@ && echo "sent	yes"
''',
}


@pytest.mark.parametrize("lang", LANGS)
def test_dns_is_local_only(svc, lang: str, udp_listener: socket.socket) -> None:
    """localhost resolves from the sandbox's /etc/hosts; there is no name server, and a
    DNS query sent to a resolver on the host's loopback (here: our own socket standing
    in for 127.0.0.53) never arrives."""
    port = udp_listener.getsockname()[1]
    code = DNS_CODE[lang]
    if lang == "bash":
        code = code.replace("@QUERY_ESC@", "'%s'" % "".join("\\x" + DNS_QUERY_HEX[i:i + 2]
                                                           for i in range(0, len(DNS_QUERY_HEX), 2)))
    res = svc.run(fill(code, lang, PORT=port, QUERY=DNS_QUERY_HEX), lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        addrs = res.tab_list("addr")
        got = res.tabs()
        assert got["nameservers"] == "0", res.describe()
        assert got["hostname"] == "sandbox" and got["hostname addr"] == "127.0.0.1", got
        assert got["sent"] == "yes", got
    else:
        got = res.json()
        addrs = got["getaddrinfo"]
        assert "nameserver" not in got["resolv.conf"], got
        assert got["hostname"] == "sandbox", got
        assert got["answer"].startswith("none"), got
        if lang == "python":
            assert got["gethostbyname"] == "127.0.0.1" and got["hostname addr"] == "127.0.0.1", got
    assert "127.0.0.1" in addrs and set(addrs) <= {"127.0.0.1", "::1"}, "localhost resolved to %s" % addrs
    assert not drain_udp(udp_listener), "the DNS query from the sandbox reached the host"


UNIX_CODE = {
    "python": r'''
import errno, json, socket
res = {}
for label, addr in (("path", @PATH@), ("abstract", "\0" + @PATH@), ("abstract-name", "\0" + @NAME@)):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(addr); res[label] = "CONNECTED"
    except OSError as e:
        res[label] = errno.errorcode.get(e.errno, str(e))
    s.close()
print(json.dumps(res))
''',
    "javascript": r'''
const net = require('net');
const connect = (path) => new Promise((resolve) => {
  const c = net.connect({ path });
  c.setTimeout(5000, () => { c.destroy(); resolve('TIMEOUT'); });
  c.on('connect', () => { c.destroy(); resolve('CONNECTED'); });
  c.on('error', (e) => resolve(e.code));
});
(async () => {
  const res = { path: await connect(@PATH@), abstract: await connect('\0' + @PATH@),
                'abstract-name': await connect('\0' + @NAME@) };
  console.log(JSON.stringify(res));
})();
''',
    "bash": r'''
# pc PREFIX NAME: connect to PREFIX.NAME ("" for a path, "\0" for the abstract namespace)
pc() { perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die; print connect($s, pack_sockaddr_un(($ARGV[0] ? "\0" : "") . $ARGV[1])) ? "CONNECTED" : ($! + 0)' -- "$1" "$2"; }
printf 'path\t%s\n' "$(pc 0 @PATH@)"
printf 'abstract\t%s\n' "$(pc 1 @PATH@)"
printf 'abstract-name\t%s\n' "$(pc 1 @NAME@)"
out=$(curl -sS --max-time 5 --unix-socket @PATH@ http://localhost/health 2>&1); printf 'curl-path\t%s %s\n' "$?" "$out"
out=$(curl -sS --max-time 5 --abstract-unix-socket @NAME@ http://localhost/health 2>&1); printf 'curl-abstract\t%s %s\n' "$?" "$out"
''',
}


def check_unix_result(res, lang: str) -> dict:
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        t = res.tabs()
        got = {k: perl_errno(t[k]) for k in ("path", "abstract", "abstract-name")}
        assert t["curl-path"].startswith("7 ") and t["curl-abstract"].startswith("7 "), t
    else:
        got = res.json()
    assert got["path"] == "ENOENT", "a host unix socket path from inside: %s" % got
    assert got["abstract-name"] == "ECONNREFUSED", "a host abstract socket from inside: %s" % got
    assert got["abstract"] == "ECONNREFUSED", got
    return got


@pytest.mark.parametrize("lang", LANGS)
def test_host_abstract_unix_socket_is_unreachable(svc, lang: str) -> None:
    name = marker("hxs-hostile-abstract-")
    listener = host_abstract_listener(name)
    try:
        res = svc.run(fill(UNIX_CODE[lang], lang, PATH="/run/" + name, NAME=name), lang)
        check_unix_result(res, lang)
        assert not drain_tcp(listener), "the sandbox reached the host's abstract socket @%s" % name
    finally:
        listener.close()


@pytest.mark.parametrize("lang", LANGS)
def test_the_service_unix_socket_is_unreachable(unix_svc, lang: str) -> None:
    """A service listening on unix:PATH: neither PATH nor the abstract name of the same
    spelling reaches it from inside its own sandboxes."""
    name = marker("hxs-hostile-abstract-")
    res = unix_svc.run(fill(UNIX_CODE[lang], lang, PATH=unix_svc.unix_path, NAME=name), lang)
    check_unix_result(res, lang)
    assert "status" not in res.out, res.describe()


RAW_CODE = {
    "python": r'''
import errno, json, socket
res = {}
for name, fam, typ, proto in (("AF_PACKET raw", 17, socket.SOCK_RAW, socket.htons(3)),
                              ("AF_PACKET dgram", 17, socket.SOCK_DGRAM, socket.htons(3)),
                              ("AF_INET raw icmp", socket.AF_INET, socket.SOCK_RAW, 1),
                              ("AF_INET raw tcp", socket.AF_INET, socket.SOCK_RAW, 6),
                              ("AF_INET raw IPPROTO_RAW", socket.AF_INET, socket.SOCK_RAW, 255),
                              ("AF_INET6 raw icmpv6", socket.AF_INET6, socket.SOCK_RAW, 58),
                              ("AF_INET SOCK_PACKET", socket.AF_INET, 10, socket.htons(3))):
    try:
        socket.socket(fam, typ, proto).close(); res[name] = "CREATED"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(res))
''',
    "bash": r'''
raw() { perl -e 'use Socket; print socket(my $s, $ARGV[0], $ARGV[1], $ARGV[2]) ? "CREATED" : ($! + 0)' -- "$@"; }
printf 'AF_PACKET raw\t%s\n' "$(raw 17 3 768)"
printf 'AF_PACKET dgram\t%s\n' "$(raw 17 2 768)"
printf 'AF_INET raw icmp\t%s\n' "$(raw 2 3 1)"
printf 'AF_INET raw IPPROTO_RAW\t%s\n' "$(raw 2 3 255)"
printf 'AF_INET6 raw icmpv6\t%s\n' "$(raw 10 3 58)"
''',
}
RAW_WANT = {"AF_PACKET raw": "EAFNOSUPPORT", "AF_PACKET dgram": "EAFNOSUPPORT", "AF_INET raw icmp": "EPERM",
            "AF_INET raw tcp": "EPERM", "AF_INET raw IPPROTO_RAW": "EPERM", "AF_INET6 raw icmpv6": "EPERM",
            "AF_INET SOCK_PACKET": "EPERM"}


@pytest.mark.parametrize("lang", ["python", "bash"])
def test_raw_and_packet_sockets_fail(svc, lang: str) -> None:
    res = svc.run(RAW_CODE[lang], lang)
    assert res.exit_code == 0, res.describe()
    got = res.json() if lang == "python" else {k: perl_errno(v) for k, v in res.tabs().items()}
    assert got and not [k for k, v in got.items() if v == "CREATED"], "raw sockets created: %s" % got
    want = {k: RAW_WANT[k] for k in got}
    assert got == want, "raw/packet sockets: got %s, want %s" % (got, want)


NETLINK_CODE = {
    "python": r'''
import errno, json, socket, struct
def attr(typ, data):
    ln = 4 + len(data)
    return struct.pack("=HH", ln, typ) + data + b"\0" * ((4 - ln % 4) % 4)
def request(msg_type, flags, payload):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    s.settimeout(5)
    s.bind((0, 0))
    s.send(struct.pack("=LHHLL", 16 + len(payload), msg_type, flags, 1, 0) + payload)
    out = []
    while True:
        data = s.recv(65536)
        off = 0
        while off + 16 <= len(data):
            ln, typ, _, _, _ = struct.unpack_from("=LHHLL", data, off)
            if typ == 2:  # NLMSG_ERROR
                err = struct.unpack_from("=i", data, off + 16)[0]
                s.close()
                return "ok" if err == 0 else errno.errorcode.get(-err, str(err)), out
            if typ == 3:  # NLMSG_DONE
                s.close()
                return "done", out
            out.append(data[off:off + ln])
            off += (ln + 3) & ~3
REQ, ACK, CREATE, EXCL, DUMP = 1, 4, 0x400, 0x200, 0x300
lo = socket.if_nametoindex("lo")
res = {}
route = struct.pack("=BBBBBBBBI", socket.AF_INET, 24, 0, 0, 254, 3, 253, 1, 0) + \
    attr(1, socket.inet_aton("10.123.0.0")) + attr(4, struct.pack("=i", lo))
res["RTM_NEWROUTE 10.123.0.0/24"] = request(24, REQ | ACK | CREATE | EXCL, route)[0]
default = struct.pack("=BBBBBBBBI", socket.AF_INET, 0, 0, 0, 254, 3, 253, 1, 0) + attr(4, struct.pack("=i", lo))
res["RTM_NEWROUTE default"] = request(24, REQ | ACK | CREATE | EXCL, default)[0]
link = struct.pack("=BxHiII", 0, 0, 0, 0, 0) + attr(3, b"hxs0\0") + attr(18, attr(1, b"dummy\0"))
res["RTM_NEWLINK dummy"] = request(16, REQ | ACK | CREATE | EXCL, link)[0]
down = struct.pack("=BxHiII", 0, 0, lo, 0, 1)  # clear IFF_UP on lo
res["RTM_SETLINK lo down"] = request(19, REQ | ACK, down)[0]
addr = struct.pack("=BBBBI", socket.AF_INET, 32, 0, 0, lo) + attr(2, socket.inet_aton("10.9.9.9")) + \
    attr(1, socket.inet_aton("10.9.9.9"))
res["RTM_NEWADDR 10.9.9.9"] = request(20, REQ | ACK | CREATE | EXCL, addr)[0]
# reading is fine
status, msgs = request(18, REQ | DUMP, struct.pack("=BxHiII", 0, 0, 0, 0, 0))
names = []
for m in msgs:
    flags = struct.unpack_from("=I", m, 16 + 8)[0]
    off = 16 + 16
    while off + 4 <= len(m):
        ln, typ = struct.unpack_from("=HH", m, off)
        if typ == 3:
            names.append((m[off + 4:off + ln].rstrip(b"\0").decode(), bool(flags & 1)))
        off += (ln + 3) & ~3
res["links"] = names
print(json.dumps(res))
''',
    "javascript": r'''
const cp = require('child_process');
const res = {};
for (const [name, argv] of @COMMANDS@) {
  const r = cp.spawnSync('ip', argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  res[name] = r.status === 0 ? 'ok' : (r.stderr || '').trim();
}
res.links = cp.spawnSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' }).stdout.trim().split('\n');
console.log(JSON.stringify(res));
''',
    "bash": r'''
while IFS='|' read -r name args; do
  [ -n "$name" ] || continue
  if out=$(ip $args 2>&1 </dev/null); then printf 'r\t%s\tok\n' "$name"; else printf 'r\t%s\t%s\n' "$name" "$(echo "$out" | head -1)"; fi
done <<'EOF'
@LINES@
EOF
ip -o link show | sed 's/^/link\t/'
ip route show table all | sed 's/^/route\t/'
''',
}
IP_COMMANDS = [
    ("route add", ["route", "add", "10.123.0.0/24", "dev", "lo"]),
    ("route add default", ["route", "add", "default", "dev", "lo"]),
    ("link add dummy", ["link", "add", "hxs0", "type", "dummy"]),
    ("link add veth", ["link", "add", "hxs1", "type", "veth", "peer", "name", "hxs2"]),
    ("addr add", ["addr", "add", "10.9.9.9/32", "dev", "lo"]),
    ("link set lo down", ["link", "set", "lo", "down"]),
    ("link set lo mtu", ["link", "set", "lo", "mtu", "1280"]),
    ("rule add", ["rule", "add", "from", "all", "lookup", "100"]),
    ("route6 add", ["-6", "route", "add", "2001:db8::/64", "dev", "lo"]),
]


@pytest.mark.parametrize("lang", LANGS)
def test_netlink_route_and_link_changes_fail(svc, lang: str) -> None:
    code = NETLINK_CODE[lang]
    if lang == "javascript":
        code = fill(code, lang, COMMANDS=IP_COMMANDS)
    elif lang == "bash":
        code = code.replace("@LINES@", "\n".join("%s|%s" % (n, " ".join(a)) for n, a in IP_COMMANDS))
    res = svc.run(code, lang)
    assert res.exit_code == 0, res.describe()
    if lang == "bash":
        got = {}
        for row in res.tab_list("r"):
            k, _, v = row.partition("\t")
            got[k] = v
        links = res.tab_list("link")
        assert all("dev lo" in r for r in res.tab_list("route")), res.describe()
    else:
        got = res.json()
        links = got.pop("links")
    if lang == "python":
        assert links == [["lo", True]], "links after the attack (lo must still be up): %s" % links
        bad = {k: v for k, v in got.items() if v != "EPERM"}
        assert not bad, "netlink changes not refused with EPERM: %s" % bad
        return
    assert len(links) == 1 and ": lo: <" in links[0] and ",UP" in links[0], links
    assert set(got) == {n for n, _ in IP_COMMANDS}, got
    bad = {k: v for k, v in got.items() if "Operation not permitted" not in v}
    assert not bad, "ip commands that did not fail with EPERM: %s" % bad
