/* SPDX-License-Identifier: Apache-2.0 */
/* The owner uid pool (see owners.h). */
#include <errno.h>
#include <linux/capability.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/error.h"
#include "ns/ns.h"
#include "ns/owners.h"

struct ns_owners {
        int fd;
        uid_t first;
        unsigned size, next, held;
        unsigned *refs;         /* holders in this engine, per uid of the pool */
};

static int lock_byte(int fd, uid_t uid, short type)
{
        struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)uid, .l_len = 1 };
        return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

int ns_owners_new(const hxs_config *cfg, const char *lock_path, ns_owners **ret, hxs_error *err)
{
        const char *path = lock_path ? lock_path : NS_OWNERS_LOCK;
        if (!lock_path)
                (void)mkdir("/run", 0755); /* a container may lack it */
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return err_fail(err, HXS_ERR_UNSUPPORTED, -errno, "the owner uids' lock file %s: %s", path,
                                strerror(errno));
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
                close(fd);
                return err_fail(err, HXS_ERR_UNSUPPORTED, -EPERM,
                                "the owner uids' lock file %s must be a regular file of the service's user that "
                                "no one else may write", path);
        }
        ns_owners *o = calloc(1, sizeof(*o));
        unsigned size = ns_owner_pool(cfg);
        unsigned *refs = calloc(size, sizeof(*refs));
        if (!o || !refs) {
                free(o);
                free(refs);
                close(fd);
                return err_fail(err, HXS_ERR_INTERNAL, -ENOMEM, "out of memory");
        }
        *o = (ns_owners){ .fd = fd, .first = cfg->uid_base + NS_OWNER_UID, .size = size, .refs = refs };
        *ret = o;
        return 0;
}

void ns_owners_free(ns_owners *o)
{
        if (!o)
                return;
        close(o->fd); /* drops every lock of ours */
        free(o->refs);
        free(o);
}

int ns_owner_take(ns_owners *o, uid_t *ret)
{
        /* round robin: a uid just given back is the last one taken again, so what is left
         * of its sandbox (a process still exiting) has the longest time to go */
        for (unsigned k = 0; k < o->size; k++) {
                unsigned i = (o->next + k) % o->size;
                if (o->refs[i] || lock_byte(o->fd, o->first + i, F_WRLCK) < 0)
                        continue; /* ours, or another engine's */
                o->refs[i] = 1;
                o->held++;
                o->next = (i + 1) % o->size;
                *ret = o->first + i;
                return 0;
        }
        return -EBUSY;
}

void ns_owner_hold(ns_owners *o, uid_t uid)
{
        if (o && uid >= o->first && uid - o->first < o->size && o->refs[uid - o->first])
                o->refs[uid - o->first]++;
}

void ns_owner_put(ns_owners *o, uid_t uid)
{
        if (!o || uid < o->first || uid - o->first >= o->size || !o->refs[uid - o->first])
                return;
        if (--o->refs[uid - o->first] == 0) {
                (void)lock_byte(o->fd, uid, F_UNLCK);
                o->held--;
        }
}

unsigned ns_owners_held(const ns_owners *o)
{
        return o ? o->held : 0;
}

/* Raw system calls: libc's setresuid would change every thread's. Back to 0 cannot
 * fail (the real and saved ids stay 0, and the kernel makes the permitted set
 * effective again); a service thread must never go on with another uid, so abort if
 * it did. */
int ns_owner_become(uid_t uid)
{
        int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
        if (syscall(SYS_setresgid, -1, uid, -1) < 0 || syscall(SYS_setresuid, -1, uid, -1) < 0) {
                int r = -errno;
                if (syscall(SYS_setresgid, -1, 0, -1) < 0)
                        abort();
                (void)prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
                return r;
        }
        (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        /* a change of euid from 0 clears the effective set: what this thread may do
         * stays what it might before (CLONE_INTO_CGROUP, the files it opens) */
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2];
        if (syscall(SYS_capget, &hdr, data) == 0) {
                data[0].effective = data[0].permitted;
                data[1].effective = data[1].permitted;
                (void)syscall(SYS_capset, &hdr, data);
        }
        return dumpable < 0 ? 1 : dumpable;
}

void ns_owner_unbecome(int dumpable)
{
        if (syscall(SYS_setresuid, -1, 0, -1) < 0 || syscall(SYS_setresgid, -1, 0, -1) < 0)
                abort();
        (void)prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
}

