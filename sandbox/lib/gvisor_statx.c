/* fte-shell: stat calls that gVisor's runsc 0.0~20221219 (Debian 12) refuses, made to work.
 *
 * That runsc answers statx(2) and newfstatat(2) with EINVAL when the flags hold AT_NO_AUTOMOUNT, a flag
 * it does not know; coreutils 9.1 passes it on every statx, so `ls -l` and `stat` fail in every runsc box
 * ("cannot access '/work': Invalid argument"). In a box nothing is an automount point, so the flag
 * changes nothing: this library retries such a call once without it, and only after that EINVAL (on any
 * other kernel the first call answers and nothing changes). Preloaded (LD_PRELOAD) in runsc boxes only
 * (fte_shell/sandbox/hardening.py); compiled when the image is built (Dockerfile.sandbox). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct statx;
struct stat;

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
    long r = syscall(SYS_statx, dirfd, path, flags, mask, buf);
    if (r < 0 && errno == EINVAL && (flags & AT_NO_AUTOMOUNT))
        r = syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
    return (int)r;
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags)
{
    long r = syscall(SYS_newfstatat, dirfd, path, buf, flags);
    if (r < 0 && errno == EINVAL && (flags & AT_NO_AUTOMOUNT))
        r = syscall(SYS_newfstatat, dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
    return (int)r;
}

int fstatat64(int dirfd, const char *path, struct stat *buf, int flags) __attribute__((alias("fstatat")));
