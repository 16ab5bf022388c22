/* The sandbox's launcher: sets up one step's confinement, then execs the step's program.
 *
 * evaluator/sandbox.py starts this small binary with vfork + exec instead of running the setup in a
 * forked copy of the evaluator: a fork of a Python process holding a gigabyte (an embedding model, a
 * test session) copies its page tables and faults on its pages, ~80 ms of system time per step, where
 * this costs ~2 ms. What it does, in the order sandbox.py used to do it between fork and exec:
 *
 *   -e FD        error pipe: a failed step setup writes "what: strerror" there and exits 126 (the
 *                descriptor is close-on-exec, so a successful exec closes it with nothing written)
 *   -n MODE      netns: unshare(NEWNET [| NEWNS]); userns: unshare(NEWUSER | NEWNET [| NEWNS]), best effort
 *   -h           hide files: a private mount namespace (with -n) where every -c DIR is covered by an
 *                empty tmpfs and every -k DIR is mounted back on top
 *   -s           strict (root): any failure of the setup stops the step; also mounts /proc hidepid=2
 *   -c DIR / -k DIR   see -h
 *   -C DIR       covered by an empty tmpfs after the -k folders are back (a folder inside one of them:
 *                the trusted binary beside the candidate's)
 *   -w DIR       chdir here once the mounts are in place (the working folder, seen through them)
 *   -r N=SOFT:HARD    setrlimit(N, ...) (N the RLIMIT_* number)
 *   -u UID       setgroups(0), setgid(UID), setuid(UID)
 *   -f HEX       a classic-BPF seccomp program (struct sock_filter array, hex); every k equal to
 *                PID_PLACEHOLDER is replaced by this process's pid (the program's own pid after exec)
 *   -x FD        the program is opened (looked up on PATH as execvp would) at descriptor FD, close-on-exec,
 *                before the limits apply, and started with execveat(FD, "", AT_EMPTY_PATH): the only exec
 *                the seccomp program allows, and FD is at the step's descriptor limit, so nothing the
 *                step runs can ever exec again
 *   -K UID       kill mode: become UID and kill(-1, SIGKILL) (every process of that uid), exit 0
 *   -- PROG ARGS the program, run with this process's environment
 *
 * The options are built by sandbox.py only (trusted); nothing here parses candidate input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <grp.h>

#define PID_PLACEHOLDER 0x7EC0DE01u

extern char **environ;
#define MAX_DIRS 64

static int err_fd = -1;

static void fail(const char *what, const char *arg)
{
    char msg[512];
    int n = snprintf(msg, sizeof msg, "sandbox: %s%s%s: %s", what, arg ? " " : "", arg ? arg : "", strerror(errno));
    if (err_fd >= 0 && n > 0)
        (void)!write(err_fd, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    _exit(126);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void install_seccomp(const char *hex)
{
    size_t len = strlen(hex);
    if (len == 0 || len % 16 != 0) {
        errno = EINVAL;
        fail("seccomp program", NULL);
    }
    size_t count = len / 16;
    struct sock_filter *prog = calloc(count, sizeof *prog);
    if (!prog)
        fail("seccomp program", NULL);
    unsigned char *bytes = (unsigned char *)prog;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            errno = EINVAL;
            fail("seccomp program", NULL);
        }
        bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    unsigned pid = (unsigned)getpid();
    for (size_t i = 0; i < count; i++)
        if (prog[i].k == PID_PLACEHOLDER)
            prog[i].k = pid;
    struct sock_fprog fprog = {.len = (unsigned short)count, .filter = prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        fail("prctl(NO_NEW_PRIVS)", NULL);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) != 0)
        fail("seccomp", NULL);
}

static void make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0755);
            *p = '/';
        }
    mkdir(buf, 0755);
}

/* Cover every `covers` dir with an empty tmpfs and mount every `keeps` dir back (opened before the
 * covers, so they are reached through the old tree), then a fresh /proc when strict. */
static void hide_files(char **covers, int ncover, char **keeps, int nkeep, char **late, int nlate, int strict)
{
    int fds[MAX_DIRS];
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 && strict)
        fail("make mounts private", NULL);
    for (int i = 0; i < nkeep; i++) {
        fds[i] = open(keeps[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fds[i] < 0 && strict)
            fail("open", keeps[i]);
    }
    for (int i = 0; i < ncover; i++)
        if (mount("tmpfs", covers[i], "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") != 0 && strict)
            fail("cover", covers[i]);
    for (int i = 0; i < nkeep; i++) {
        if (fds[i] < 0)
            continue;
        char src[64];
        snprintf(src, sizeof src, "/proc/self/fd/%d", fds[i]);
        make_dirs(keeps[i]);
        if (mount(src, keeps[i], NULL, MS_BIND | MS_REC, NULL) != 0 && strict)
            fail("expose", keeps[i]);
        close(fds[i]);
    }
    for (int i = 0; i < nlate; i++)
        if (mount("tmpfs", late[i], "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") != 0)
            fail("cover", late[i]);  /* strict or not: a folder the program must not see stays unseen */
    if (strict && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") != 0)
        fail("mount /proc", NULL);
}

/* The program's path as execvp would find it: as given when it holds a '/', else the first PATH entry. */
static const char *find_program(const char *name, char *buf, size_t size)
{
    if (strchr(name, '/'))
        return name;
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && (size_t)snprintf(buf, size, "%.*s/%s", (int)len, p, name) < size && access(buf, X_OK) == 0)
            return buf;
        p += len + (end ? 1 : 0);
    }
    errno = ENOENT;
    return NULL;
}

/* Open the program at descriptor `at` (close-on-exec): what execveat will start. */
static void hold_program(const char *name, int at)
{
    char buf[4096];
    const char *path = find_program(name, buf, sizeof buf);
    if (!path)
        fail("exec", name);
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        fail("exec", name);
    if (fd != at && (dup3(fd, at, O_CLOEXEC) < 0 || close(fd) != 0))
        fail("hold the program at descriptor", NULL);
}

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, text, strlen(text));
        close(fd);
    }
}

static void become(const char *uid_text)
{
    uid_t uid = (uid_t)strtoul(uid_text, NULL, 10);
    if (setgroups(0, NULL) != 0)
        fail("setgroups", NULL);
    if (setgid(uid) != 0)
        fail("setgid", uid_text);
    if (setuid(uid) != 0)
        fail("setuid", uid_text);
}

int main(int argc, char **argv)
{
    const char *netmode = "none", *workdir = NULL, *uid = NULL, *filter = NULL;
    int exec_fd = -1;
    char *covers[MAX_DIRS], *keeps[MAX_DIRS], *late[MAX_DIRS];
    int ncover = 0, nkeep = 0, nlate = 0, hide = 0, strict = 0;
    struct {
        int resource;
        rlim_t soft, hard;
    } limits[16];
    int nlimits = 0;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(opt, "-h") == 0) {
            hide = 1;
            continue;
        }
        if (strcmp(opt, "-s") == 0) {
            strict = 1;
            continue;
        }
        if (!val) {
            errno = EINVAL;
            fail("option without a value", opt);
        }
        i++;
        if (strcmp(opt, "-e") == 0) {
            err_fd = atoi(val);
            fcntl(err_fd, F_SETFD, FD_CLOEXEC);
        } else if (strcmp(opt, "-n") == 0) {
            netmode = val;
        } else if (strcmp(opt, "-c") == 0 && ncover < MAX_DIRS) {
            covers[ncover++] = (char *)val;
        } else if (strcmp(opt, "-k") == 0 && nkeep < MAX_DIRS) {
            keeps[nkeep++] = (char *)val;
        } else if (strcmp(opt, "-C") == 0 && nlate < MAX_DIRS) {
            late[nlate++] = (char *)val;
        } else if (strcmp(opt, "-w") == 0) {
            workdir = val;
        } else if (strcmp(opt, "-r") == 0 && nlimits < 16) {
            unsigned long long soft, hard;
            int res;
            if (sscanf(val, "%d=%llu:%llu", &res, &soft, &hard) != 3) {
                errno = EINVAL;
                fail("rlimit", val);
            }
            limits[nlimits].resource = res;
            limits[nlimits].soft = (rlim_t)soft;
            limits[nlimits].hard = (rlim_t)hard;
            nlimits++;
        } else if (strcmp(opt, "-u") == 0) {
            uid = val;
        } else if (strcmp(opt, "-f") == 0) {
            filter = val;
        } else if (strcmp(opt, "-x") == 0) {
            exec_fd = atoi(val);
        } else if (strcmp(opt, "-K") == 0) {
            become(val);
            kill(-1, SIGKILL);
            _exit(0);
        } else {
            errno = EINVAL;
            fail("unknown option", opt);
        }
    }
    if (i + 1 >= argc) {
        errno = EINVAL;
        fail("no program after --", NULL);
    }
    char **program = argv + i + 1;
    if (exec_fd >= 0)
        hold_program(program[0], exec_fd);  /* before the limits: the descriptor limit is at exec_fd */

    int ns = hide ? CLONE_NEWNS : 0;
    if (strcmp(netmode, "netns") == 0) {
        if (unshare(CLONE_NEWNET | ns) != 0)
            fail("unshare", NULL);
    } else if (strcmp(netmode, "userns") == 0 && !uid) {
        /* Without root: our own uid and gid mapped to themselves in a user namespace, so the tmpfs
         * covers and the folders mounted back are ours to create. Best effort: what the kernel
         * refuses leaves the step with the limits and seccomp only (sandbox.py reports it). */
        uid_t me = getuid();
        gid_t group = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET | ns) == 0) {
            char map[64];
            snprintf(map, sizeof map, "%u %u 1", (unsigned)me, (unsigned)me);
            write_file("/proc/self/uid_map", map);
            write_file("/proc/self/setgroups", "deny");
            snprintf(map, sizeof map, "%u %u 1", (unsigned)group, (unsigned)group);
            write_file("/proc/self/gid_map", map);
        }
    }
    if (hide) {
        hide_files(covers, ncover, keeps, nkeep, late, nlate, strict);
        if (workdir && chdir(workdir) != 0)
            fail("chdir", workdir);
    }
    for (int k = 0; k < nlimits; k++) {
        struct rlimit rl = {limits[k].soft, limits[k].hard};
        if (setrlimit(limits[k].resource, &rl) != 0)
            fail("setrlimit", NULL);
    }
    if (uid)
        become(uid);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)  /* after setuid, which clears it */
        fail("prctl(PDEATHSIG)", NULL);
    if (filter)
        install_seccomp(filter);
    if (exec_fd >= 0)
        syscall(SYS_execveat, exec_fd, "", program, environ, AT_EMPTY_PATH);
    else
        execvp(program[0], program);  /* PATH of the step's own (clean) environment, as Popen searched it */
    fail("exec", program[0]);
    return 126;
}
