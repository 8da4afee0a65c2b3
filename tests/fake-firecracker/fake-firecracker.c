/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for Firecracker, for testing the Firecracker driver (src/vm/firecracker.c)
 * where Firecracker or KVM is missing. Static, so it runs inside the driver's jail.
 *
 * It serves the API the driver uses on --api-sock and checks every request as
 * strictly as it can (unknown keys, wrong values and unreadable paths get a 400 with
 * a fault_message, as Firecracker would answer). On InstanceStart it plays the guest:
 * it listens on the vsock's uds_path, drops the first two connections after reading
 * CONNECT (an agent that is not listening yet), answers the third "OK <port>", and
 * then speaks a minimal agent: READY to HELLO, and after RUN, CODE, STDIN and START
 * one STDOUT frame describing the jail it found itself in (so the test can check it)
 * followed by the code it received, and an EXIT. Then it exits, as a VM powers off.
 *
 * What it does is chosen by the first line of the "kernel" (/vmlinux in the jail):
 *   ok                      as above
 *   reject-machine-config   400 to PUT /machine-config
 *   bad-http                a 204 with a body
 *   exit-after-start        exits with a message on stderr after InstanceStart
 *   bad-ok                  answers CONNECT with "OK garbage"
 *   symlink                 /run/v.sock is a symlink to the real socket
 *   hold-api                accepts the API connection and never answers
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "fake-agent.h"

static char mode[64] = "ok";
static bool have_boot, have_drive, have_machine, have_vsock;
static unsigned mem_mib, vcpus;
static char uds_path[108];
static const char *vm_id = "";

static void die(const char *what)
{
        fprintf(stderr, "fake-firecracker: %s: %s\n", what, strerror(errno));
        exit(1);
}

/* ---- API ------------------------------------------------------------------------------ */

static const char *readable(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return "cannot open a path for reading";
        close(fd);
        return NULL;
}

/* Returns NULL when the request is fine, else the fault message. */
static const char *handle(const char *path, json_t *body)
{
        json_error_t je;
        if (strcmp(path, "/boot-source") == 0) {
                const char *kernel, *initrd, *args;
                if (json_unpack_ex(body, &je, JSON_STRICT, "{s:s, s:s, s:s}", "kernel_image_path", &kernel,
                                   "initrd_path", &initrd, "boot_args", &args) < 0)
                        return "boot-source: unexpected keys or types";
                if (readable(kernel) || readable(initrd))
                        return readable(kernel) ? "kernel_image_path: cannot open" : "initrd_path: cannot open";
                static const char *const need[] = { "console=ttyS0", "reboot=k", "panic=-1", "pci=off",
                                                    "hexr.vsock=1024" };
                for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
                        if (!strstr(args, need[i]))
                                return "boot_args: a required parameter is missing";
                if (strstr(args, "hexr.port"))
                        return "boot_args: hexr.port is QEMU's";
                have_boot = true;
                return NULL;
        }
        if (strcmp(path, "/drives/root") == 0) {
                const char *id, *p;
                int root, ro;
                if (json_unpack_ex(body, &je, JSON_STRICT, "{s:s, s:s, s:b, s:b}", "drive_id", &id, "path_on_host",
                                   &p, "is_root_device", &root, "is_read_only", &ro) < 0)
                        return "drives: unexpected keys or types";
                if (strcmp(id, "root") != 0 || root || !ro)
                        return "drives: want drive_id root, is_root_device false, is_read_only true";
                if (readable(p))
                        return "path_on_host: cannot open";
                int fd = open(p, O_RDWR | O_CLOEXEC);
                if (fd >= 0)
                        return "path_on_host: the image is writable in the jail";
                have_drive = true;
                return NULL;
        }
        if (strcmp(path, "/machine-config") == 0) {
                if (strcmp(mode, "reject-machine-config") == 0)
                        return "fake: machine config rejected \"on purpose\"\n";
                int vc, mm;
                if (json_unpack_ex(body, &je, JSON_STRICT, "{s:i, s:i}", "vcpu_count", &vc, "mem_size_mib", &mm) < 0 ||
                    vc < 0 || mm < 0)
                        return "machine-config: unexpected keys or types";
                vcpus = (unsigned)vc;
                mem_mib = (unsigned)mm;
                if (vcpus != 1 || mem_mib < 128)
                        return "machine-config: want 1 vCPU and at least 128 MiB";
                have_machine = true;
                return NULL;
        }
        if (strcmp(path, "/vsock") == 0) {
                int cid;
                const char *p;
                if (json_unpack_ex(body, &je, JSON_STRICT, "{s:i, s:s}", "guest_cid", &cid, "uds_path", &p) < 0)
                        return "vsock: unexpected keys or types";
                if (cid != 3 || strlen(p) >= sizeof(uds_path) || strncmp(p, "/run/", 5) != 0)
                        return "vsock: want guest_cid 3 and a uds_path in /run";
                snprintf(uds_path, sizeof(uds_path), "%s", p);
                have_vsock = true;
                return NULL;
        }
        if (strcmp(path, "/actions") == 0) {
                const char *a;
                if (json_unpack_ex(body, &je, JSON_STRICT, "{s:s}", "action_type", &a) < 0 ||
                    strcmp(a, "InstanceStart") != 0)
                        return "actions: want InstanceStart";
                if (!have_boot || !have_drive || !have_machine || !have_vsock)
                        return "InstanceStart before the VM was configured";
                return NULL;
        }
        return "unknown resource";
}

static void answer(int fd, int status, const char *fault)
{
        char buf[1024];
        if (!fault) {
                int n = snprintf(buf, sizeof(buf), "HTTP/1.1 %d \r\nServer: Firecracker API\r\n"
                                 "Connection: keep-alive\r\n\r\n", status);
                fake_write_all(fd, buf, (size_t)n);
                return;
        }
        json_t *j = json_pack("{s:s}", "fault_message", fault);
        char *body = json_dumps(j, JSON_COMPACT);
        int n = snprintf(buf, sizeof(buf), "HTTP/1.1 %d \r\nServer: Firecracker API\r\nContent-Type: "
                         "application/json\r\nContent-Length: %zu\r\n\r\n%s", status, strlen(body), body);
        fake_write_all(fd, buf, (size_t)n);
        free(body);
        json_decref(j);
}

/* Serves requests until InstanceStart has been answered. */
static void serve_api(int conn)
{
        static char buf[65536];
        size_t len = 0;
        for (;;) {
                char *end = NULL;
                while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
                        if (len == sizeof(buf))
                                die("request head too long");
                        ssize_t n = read(conn, buf + len, sizeof(buf) - len);
                        if (n <= 0) {
                                errno = n == 0 ? EPIPE : errno;
                                die("the driver closed the API connection");
                        }
                        len += (size_t)n;
                }
                *end = '\0';
                size_t head = (size_t)(end - buf) + 4;
                char method[16], path[128];
                if (sscanf(buf, "%15s %127s HTTP/1.1", method, path) != 2)
                        die("request line");
                const char *cl = strcasestr(buf, "\r\nContent-Length:");
                size_t blen = cl ? strtoul(cl + 17, NULL, 10) : 0;
                if (blen > sizeof(buf) - head)
                        die("request body too long");
                while (len < head + blen) {
                        ssize_t n = read(conn, buf + len, sizeof(buf) - len);
                        if (n <= 0)
                                die("request body");
                        len += (size_t)n;
                }
                if (strcmp(mode, "bad-http") == 0) {
                        static const char bad[] = "HTTP/1.1 204 \r\nContent-Length: 5\r\n\r\nhello";
                        fake_write_all(conn, bad, sizeof(bad) - 1);
                        sleep(5);
                        exit(1);
                }
                json_t *body = json_loadb(buf + head, blen, JSON_REJECT_DUPLICATES, NULL);
                const char *fault = strcmp(method, "PUT") != 0 ? "only PUT is expected"
                                    : !json_is_object(body) ? "the body is not a JSON object"
                                                            : handle(path, body);
                json_decref(body);
                answer(conn, fault ? 400 : 204, fault);
                if (!fault && strcmp(path, "/actions") == 0)
                        return;
                memmove(buf, buf + head + blen, len - head - blen);
                len -= head + blen;
        }
}

/* ---- what the jail looks like from inside ------------------------------------------------- */

static int cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_dir(const char *path, char *out, size_t size)
{
        char *names[64];
        size_t n = 0;
        DIR *d = opendir(path);
        out[0] = '\0';
        if (!d) {
                snprintf(out, size, "(%s)", strerrorname_np(errno));
                return;
        }
        struct dirent *de;
        while ((de = readdir(d)) && n < 64)
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        names[n++] = strdup(de->d_name);
        closedir(d);
        qsort(names, n, sizeof(names[0]), cmp);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                o += (size_t)snprintf(out + o, o < size ? size - o : 0, "%s%s", i ? "," : "", names[i]);
                free(names[i]);
        }
}

static const char *open_result(const char *path, int flags)
{
        int fd = open(path, flags | O_CLOEXEC, 0600);
        if (fd < 0)
                return strerrorname_np(errno);
        close(fd);
        return "ok";
}

static void describe(char *out, size_t size)
{
        char ids[256], root[512], dev[256], ifaces[256] = "";
        fake_ids(ids, sizeof(ids));
        list_dir("/", root, sizeof(root));
        list_dir("/dev", dev, sizeof(dev));
        struct if_nameindex *ifs = if_nameindex();
        for (struct if_nameindex *i = ifs; i && i->if_index; i++)
                snprintf(ifaces + strlen(ifaces), sizeof(ifaces) - strlen(ifaces), "%s%s", ifaces[0] ? "," : "",
                         i->if_name);
        if (ifs)
                if_freenameindex(ifs);
        struct stat st;
        char kvm[96] = "missing";
        if (stat("/dev/kvm", &st) == 0)
                snprintf(kvm, sizeof(kvm), "%s:%u:%u:uid%u:%o:%s", S_ISCHR(st.st_mode) ? "c" : "?",
                         major(st.st_rdev), minor(st.st_rdev), (unsigned)st.st_uid, st.st_mode & 07777,
                         open_result("/dev/kvm", O_RDWR));
        snprintf(out, size,
                 "%s root=%s dev=%s kvm=%s ifaces=%s rootwrite=%s imagewrite=%s runwrite=%s mem=%u vcpus=%u id=%s\n",
                 ids, root, dev, kvm, ifaces, open_result("/fake-write-test", O_WRONLY | O_CREAT),
                 open_result("/rootfs.ext4", O_RDWR), open_result("/run/fake-write-test", O_WRONLY | O_CREAT), mem_mib,
                 vcpus, vm_id);
        unlink("/run/fake-write-test");
}

/* ---- the guest side of the vsock ------------------------------------------------------------ */

static int listen_unix(const char *path)
{
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 8) < 0)
                die(path);
        return s;
}

static void read_line(int fd, char *buf, size_t size)
{
        size_t len = 0;
        while (len + 1 < size) {
                ssize_t n = read(fd, buf + len, 1);
                if (n <= 0)
                        die("reading CONNECT");
                if (buf[len++] == '\n')
                        break;
        }
        buf[len] = '\0';
}

/* START: one STDOUT frame with what the jail looks like and the code, then EXIT. */
static void on_start(int fd, const char *code, size_t code_len, bool have_run)
{
        static char out[8192];
        (void)have_run;
        describe(out, sizeof(out));
        size_t n = strlen(out);
        n += (size_t)snprintf(out + n, sizeof(out) - n, "code=%.*s\n", (int)code_len, code);
        fake_report_and_exit(fd, out, n);
}

static void guest(void)
{
        char real[128];
        snprintf(real, sizeof(real), "%s", uds_path);
        if (strcmp(mode, "symlink") == 0) {
                snprintf(real, sizeof(real), "/run/real.sock");
                if (symlink(real, uds_path) < 0)
                        die("symlink");
        }
        int ls = listen_unix(real);
        for (int attempt = 0;; attempt++) {
                int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                        die("accept");
                char line[64];
                read_line(c, line, sizeof(line));
                if (strcmp(line, "CONNECT 1024\n") != 0) {
                        fprintf(stderr, "fake-firecracker: unexpected handshake %s\n", line);
                        exit(1);
                }
                if (attempt < 2) { /* the agent is not listening yet */
                        close(c);
                        continue;
                }
                if (strcmp(mode, "bad-ok") == 0) {
                        fake_write_all(c, "OK garbage\n", 11);
                        sleep(5);
                        exit(1);
                }
                fake_write_all(c, "OK 1073741824\n", 14);
                fake_agent(c, "fake-agent", on_start);
        }
}

int main(int argc, char **argv)
{
        const char *api_path = NULL;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--api-sock") == 0 && i + 1 < argc) {
                        api_path = argv[++i];
                } else if (strcmp(argv[i], "--id") == 0 && i + 1 < argc) {
                        vm_id = argv[++i];
                } else {
                        fprintf(stderr, "fake-firecracker: unexpected argument %s\n", argv[i]);
                        return 2;
                }
        }
        if (!api_path) {
                fprintf(stderr, "fake-firecracker: no --api-sock\n");
                return 2;
        }
        FILE *k = fopen("/vmlinux", "re");
        if (k) {
                if (fgets(mode, sizeof(mode), k))
                        mode[strcspn(mode, "\n")] = '\0';
                fclose(k);
        }
        int ls = listen_unix(api_path);
        int conn = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0)
                die("accept");
        if (strcmp(mode, "hold-api") == 0)
                for (;;)
                        pause();
        serve_api(conn);
        if (strcmp(mode, "exit-after-start") == 0) {
                fprintf(stderr, "fake-firecracker: exiting on purpose\n");
                return 3;
        }
        guest();
        return 0;
}
