/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hexr-sandbox image build [--output DIR] [--force] [--from host|debootstrap]
 * hexr-sandbox image info [DIR]
 *
 * The microVM guest image. The work (apt-get download, dpkg-deb, lz4, the cpio, the
 * ext4) is done by image-build.py, run with Debian's /usr/bin/python3; this verb
 * finds it and the agent, and passes them the directory (SANDBOX_VM_IMAGE_DIR unless
 * --output says otherwise). Where they are looked for, in order:
 *   the script: <dir of this binary>/image-build.py, <prefix>/share/hexr-sandbox/,
 *               the source tree this binary was built from (HXS_SOURCE_DIR);
 *   the agent:  <dir of this binary>/hexr-agent, <prefix>/lib/hexr-sandbox/.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "hexr-sandbox/sandbox.h"

#define PYTHON "/usr/bin/python3"

static void usage(FILE *f)
{
        fprintf(f, "usage: hexr-sandbox image build [--output DIR] [--force] [--from host|debootstrap]\n"
                   "       hexr-sandbox image info [DIR]\n\n"
                   "build: the microVM guest image (kernel, initramfs with the agent, read-only root)\n"
                   "       into DIR (default: SANDBOX_VM_IMAGE_DIR); reused when nothing changed;\n"
                   "       the root from the packages installed on this host, or from debootstrap\n"
                   "info:  what the image in DIR holds, or what is missing\n");
}

static bool is_file(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* dir of /proc/self/exe into buf */
static int self_dir(char *buf, size_t size)
{
        ssize_t n = readlink("/proc/self/exe", buf, size - 1);
        if (n <= 0)
                return -errno;
        buf[n] = '\0';
        char *slash = strrchr(buf, '/');
        if (!slash)
                return -EINVAL;
        *slash = '\0';
        return 0;
}

/* The first candidate that is a file: <dir of this binary>/<rel>/<name> for each rel,
 * then, for the script, the source tree. */
static int find_file(const char *name, const char *const *rels, bool source, char *ret, size_t size)
{
        char self[PATH_MAX];
        if (self_dir(self, sizeof(self)) == 0)
                for (const char *const *r = rels; *r; r++) {
                        snprintf(ret, size, "%s/%s/%s", self, *r, name);
                        if (is_file(ret))
                                return 0;
                }
#ifdef HXS_SOURCE_DIR
        if (source) {
                snprintf(ret, size, "%s/scripts/%s", HXS_SOURCE_DIR, name);
                if (is_file(ret))
                        return 0;
        }
#endif
        return -ENOENT;
}

static int run_script(char *const argv[])
{
        fflush(stdout);
        execv(PYTHON, argv);
        fprintf(stderr, "hexr-sandbox image: cannot run %s: %s\n", PYTHON, strerror(errno));
        return 1;
}

int cli_image(int argc, char **argv)
{
        static const char *const script_dirs[] = { ".", "../share/hexr-sandbox", NULL };
        static const char *const agent_dirs[] = { ".", "../lib/hexr-sandbox", NULL };
        char script[PATH_MAX], agent[PATH_MAX];
        const char *output = NULL, *from = "host";
        bool force = false;

        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? 1 : 0;
        }
        const char *verb = argv[1];
        if (strcmp(verb, "build") != 0 && strcmp(verb, "info") != 0) {
                fprintf(stderr, "hexr-sandbox image: unknown verb \"%s\"\n", verb);
                usage(stderr);
                return 1;
        }
        static const struct option opts[] = {
                { "output", required_argument, NULL, 'o' },
                { "force", no_argument, NULL, 'f' },
                { "from", required_argument, NULL, 'F' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        optind = 2;
        int c;
        while ((c = getopt_long(argc, argv, "o:fh", opts, NULL)) != -1) {
                switch (c) {
                case 'o':
                        output = optarg;
                        break;
                case 'f':
                        force = true;
                        break;
                case 'F':
                        if (strcmp(optarg, "host") != 0 && strcmp(optarg, "debootstrap") != 0) {
                                fprintf(stderr, "hexr-sandbox image: --from: \"%s\" is neither host nor debootstrap\n",
                                        optarg);
                                return 1;
                        }
                        from = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 1;
                }
        }
        bool build = strcmp(verb, "build") == 0;
        if (optind < argc) {
                if (build || optind + 1 < argc || output) {
                        usage(stderr);
                        return 1;
                }
                output = argv[optind];
        }
        if (!build && (force || strcmp(from, "host") != 0)) {
                usage(stderr);
                return 1;
        }

        hxs_config cfg;
        hxs_error err = { 0 };
        if (!output) {
                if (hxs_config_from_env(&cfg, &err) < 0) {
                        fprintf(stderr, "hexr-sandbox image: %s\n", err.message);
                        return 1;
                }
                output = cfg.vm_image_dir;
        }
        if (!output[0]) {
                fprintf(stderr, "hexr-sandbox image: no directory (SANDBOX_VM_IMAGE_DIR is empty; use --output)\n");
                return 1;
        }
        if (find_file("image-build.py", script_dirs, true, script, sizeof(script)) < 0) {
                fprintf(stderr, "hexr-sandbox image: image-build.py is neither next to this binary, nor in "
                                "../share/hexr-sandbox, nor in the source tree\n");
                return 1;
        }
        if (!is_file(PYTHON)) {
                fprintf(stderr, "hexr-sandbox image: %s is needed (Debian's python3)\n", PYTHON);
                return 1;
        }
        if (!build) {
                char *const args[] = { PYTHON, script, "info", (char *)output, NULL };
                return run_script(args);
        }
        if (find_file("hexr-agent", agent_dirs, false, agent, sizeof(agent)) < 0) {
                fprintf(stderr, "hexr-sandbox image: the guest agent (hexr-agent) is neither next to this "
                                "binary nor in ../lib/hexr-sandbox\n");
                return 1;
        }
        char *args[] = { PYTHON, script, "build", "--output", (char *)output, "--agent", agent,
                         "--from", (char *)from, force ? "--force" : NULL, NULL };
        return run_script(args);
}
