/*
 * latencyfs: a passthrough FUSE filesystem that charges a fixed latency per
 * request, to imitate a network filesystem (NFS-like) on any Linux box.
 *
 * Every request the kernel sends (except FORGET, INIT, DESTROY, INTERRUPT)
 * first waits for a free "server slot" (only when --max-inflight is given),
 * then sleeps for the configured latency (metadata or data), then performs the
 * real operation on the backing directory and replies.  Requests are served by
 * a large thread pool, so many of them sleep at once, like independent RPCs.
 *
 * Written against the libfuse3 low-level API; the inode handling follows the
 * approach of libfuse's example/passthrough_ll.c (one O_PATH fd per inode,
 * inodes keyed by (st_dev, st_ino)), rewritten here with a lock-striped hash
 * table so that no global lock sits on the hot path and no lock is ever held
 * while sleeping.
 *
 * Usage:
 *   latencyfs [options] BACKING_DIR MOUNTPOINT
 *     --latency-ms F       metadata latency per request (default 1.0)
 *     --data-latency-ms F  read/write latency per request (default: --latency-ms)
 *     --max-inflight N     at most N requests served at once (default 0 = unlimited)
 *     --cache-seconds F    kernel entry/attr/negative-entry timeout (default 3; 0 = off)
 *     --threads N          worker threads (default 512)
 *     --max-background N   kernel max_background (default 512)
 *     --no-clone-fd        all workers read the one /dev/fuse fd
 *     --allow-other        let every user in (allow_other,default_permissions)
 *     --fault-errno E      answer E (EIO, ESTALE, EAGAIN, EINTR, ETIMEDOUT, ENOSPC or a
 *                          number) instead of doing the operation: fault injection
 *     --fault-ops LIST     which requests fail: create,mkdir,symlink,write,flush
 *                          (default create)
 *     --fault-match S      only for names (create, mkdir, symlink) or backing paths
 *                          (write, flush) containing S (default: all)
 *     --fault-times N      fail N matching requests in all, then serve them
 *                          (default: fail every one)
 *     --slots-name NAME    the --max-inflight slots are the named semaphore NAME
 *                          ("/name"), shared by every daemon given it: one server
 *                          behind many mounts (created with N slots by the first)
 *     --casefold           case-insensitive, case-preserving names (ASCII letters), as
 *                          an SMB share, NTFS or APFS: a name finds the entry spelled in
 *                          any case, a new name equal to one ignoring case is EEXIST;
 *                          the kernel's entry cache is off (its names are exact)
 *     --stats FILE         count the requests served, by operation, in FILE (a
 *                          text header naming the counters, then the counters as
 *                          native uint64 at byte STATS_OFFSET; read it any time)
 *     -f                   stay in the foreground
 *     -d                   libfuse debug output (implies -f)
 *     -o OPTS              extra mount options passed to libfuse
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Default worker threads.  A 64-thread writer keeps ~64 synchronous requests
 * in flight plus asynchronous RELEASEs (up to max_background); 512 leaves
 * headroom for 256 clients.  Idle threads cost only virtual memory.  (Chosen
 * for the 64-thread target of issue 4; see docs/latencyfs.md for the run.) */
#define DEFAULT_THREADS 512
/* Kernel default max_background is 12, which throttles asynchronous requests
 * (RELEASE on close, readahead) to 12 in flight: at 1 ms that caps closes at
 * ~12k/s.  Root may raise it freely; 512 matches the thread pool. */
#define DEFAULT_MAX_BACKGROUND 512
/* Hash buckets for the inode table: 2^18 keeps chains short up to a few
 * hundred thousand live inodes (the 160k-file benchmark tree); 2 MiB. */
#define INODE_BUCKETS (1u << 18)
/* Lock stripes for the inode table; a power of two well above the thread
 * count in flight so that lookups in different directories rarely meet. */
#define INODE_STRIPES 1024u
/* --stats: the counters start here, after the text header that names them. */
#define STATS_OFFSET 4096

enum kind { META, DATA };

struct config {
	uint64_t meta_ns;
	uint64_t data_ns;
	unsigned max_inflight;
	double cache_s;
	unsigned threads;
	unsigned max_background;
	bool clone_fd;
	bool allow_other;
	bool casefold;
	bool foreground;
	bool debug;
	const char *extra_opts;
	char *backing;
	char *mountpoint;
};

static struct config cfg = {
	.meta_ns = 1000000,
	.data_ns = UINT64_MAX, /* = meta_ns unless given */
	.max_inflight = 0,
	.cache_s = 3.0,
	.threads = DEFAULT_THREADS,
	.max_background = DEFAULT_MAX_BACKGROUND,
	.clone_fd = true,
};

static sem_t slot_sem;
static sem_t *slots = &slot_sem;
/* --slots-name: the slots are a named semaphore that every daemon given the same
 * name shares (one server, many client mounts); NULL: this daemon's own. */
static const char *slots_name;

/* ------------------------------------------------------------ statistics */

/* The requests that are charged a latency, in the order of the stats file. */
#define OPS(X)                                                                            \
	X(lookup) X(getattr) X(setattr) X(readlink) X(access) X(mknod) X(mkdir) X(symlink) \
	X(link) X(unlink) X(rmdir) X(rename) X(open) X(create) X(read) X(write_buf)        \
	X(flush) X(release) X(fsync) X(fallocate) X(opendir) X(readdir) X(releasedir)      \
	X(fsyncdir) X(statfs)

enum op {
#define X(name) OP_##name,
	OPS(X)
#undef X
	/* requests that found every server slot taken, and the time they waited */
	STAT_SLOT_WAITS,
	STAT_SLOT_WAIT_NS,
	/* with --max-inflight: the time slots were held (latency, operation, reply) */
	STAT_SLOT_BUSY_NS,
	STAT_COUNT
};

static const char *const stat_names[STAT_COUNT] = {
#define X(name) #name,
	OPS(X)
#undef X
	"slot_waits", "slot_wait_ns", "slot_busy_ns",
};

static const char *stats_path;
static uint64_t *stats; /* NULL: not counting */

static inline void count(enum op i, uint64_t n)
{
	if (stats)
		__atomic_fetch_add(&stats[i], n, __ATOMIC_RELAXED);
}

/* The stats file: "latencyfs stats 1", one counter name per line, NUL padding up
 * to STATS_OFFSET, then the counters, mapped shared so readers see them live. */
static int open_stats(void)
{
	int fd = open(stats_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	char head[STATS_OFFSET] = "latencyfs stats 1\n";
	size_t len = strlen(head);
	for (unsigned i = 0; i < STAT_COUNT; i++)
		len += (size_t)snprintf(head + len, sizeof(head) - len, "%s\n", stat_names[i]);
	size_t size = STATS_OFFSET + STAT_COUNT * sizeof(uint64_t);
	if (pwrite(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head) ||
	    ftruncate(fd, (off_t)size) != 0)
		goto fail;
	void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto fail;
	close(fd);
	stats = (uint64_t *)((char *)map + STATS_OFFSET);
	return 0;
fail:
	fprintf(stderr, "latencyfs: %s: %s\n", stats_path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---------------------------------------------------------- fault injection */

#define FAULT_CREATE 1u
#define FAULT_MKDIR 2u
#define FAULT_SYMLINK 4u
#define FAULT_WRITE 8u
#define FAULT_FLUSH 16u

static int fault_errno;               /* 0: no faults */
static unsigned fault_ops = FAULT_CREATE;
static const char *fault_match;       /* NULL: every name */
static long fault_left = -1;          /* faults still to give; -1: every time */

/* Whether this request (op on name) is to fail now; takes one of fault_left. */
static bool fault_name(unsigned op, const char *name)
{
	if (!fault_errno || !(fault_ops & op))
		return false;
	if (fault_match && (!name || !strstr(name, fault_match)))
		return false;
	long left = __atomic_load_n(&fault_left, __ATOMIC_RELAXED);
	if (left < 0)
		return true;
	while (left > 0)
		if (__atomic_compare_exchange_n(&fault_left, &left, left - 1, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return true;
	return false;
}

/* The same for a request on an open file: matched by its backing path. */
static bool fault_fd(unsigned op, int fd)
{
	if (!fault_errno || !(fault_ops & op))
		return false;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return false;
	path[n] = 0;
	return fault_name(op, path);
}

/* ---------------------------------------------------------------- inodes */

struct inode {
	struct inode *next; /* hash chain, guarded by the stripe lock */
	int fd;             /* O_PATH fd of the backing object */
	ino_t ino;
	dev_t dev;
	uint64_t nlookup;   /* guarded by the stripe lock */
};

static struct inode root_inode;
static struct inode **buckets;
static pthread_mutex_t stripes[INODE_STRIPES];

static inline struct inode *get_inode(fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &root_inode;
	return (struct inode *)(uintptr_t)ino;
}

static inline int inode_fd(fuse_ino_t ino)
{
	return get_inode(ino)->fd;
}

static inline uint32_t inode_hash(ino_t ino, dev_t dev)
{
	uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev * 0xC2B2AE3D27D4EB4Full;
	return (uint32_t)(h >> 32) & (INODE_BUCKETS - 1);
}

/* Find the inode for st (taking one lookup reference) or insert one owning
 * fd.  Returns the inode; *fd_used tells whether fd was taken over. */
static struct inode *inode_ref(const struct stat *st, int fd, bool *fd_used)
{
	uint32_t h = inode_hash(st->st_ino, st->st_dev);
	pthread_mutex_t *lock = &stripes[h & (INODE_STRIPES - 1)];
	struct inode *fresh = calloc(1, sizeof(*fresh)); /* allocate outside the lock */
	struct inode *found;

	*fd_used = false;
	pthread_mutex_lock(lock);
	for (found = buckets[h]; found; found = found->next)
		if (found->ino == st->st_ino && found->dev == st->st_dev)
			break;
	if (found) {
		found->nlookup++;
	} else if (fresh) {
		fresh->fd = fd;
		fresh->ino = st->st_ino;
		fresh->dev = st->st_dev;
		fresh->nlookup = 1;
		fresh->next = buckets[h];
		buckets[h] = fresh;
		found = fresh;
		fresh = NULL;
		*fd_used = true;
	}
	pthread_mutex_unlock(lock);
	free(fresh);
	return found;
}

static void inode_unref(struct inode *in, uint64_t n)
{
	if (in == &root_inode)
		return;
	uint32_t h = inode_hash(in->ino, in->dev);
	pthread_mutex_t *lock = &stripes[h & (INODE_STRIPES - 1)];
	bool dead = false;

	pthread_mutex_lock(lock);
	in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	if (in->nlookup == 0) {
		struct inode **pp;
		for (pp = &buckets[h]; *pp; pp = &(*pp)->next) {
			if (*pp == in) {
				*pp = in->next;
				break;
			}
		}
		dead = true;
	}
	pthread_mutex_unlock(lock);
	if (dead) {
		close(in->fd);
		free(in);
	}
}

static void inode_addref(struct inode *in)
{
	if (in == &root_inode)
		return;
	uint32_t h = inode_hash(in->ino, in->dev);
	pthread_mutex_t *lock = &stripes[h & (INODE_STRIPES - 1)];
	pthread_mutex_lock(lock);
	in->nlookup++;
	pthread_mutex_unlock(lock);
}

/* ---------------------------------------------------------------- latency */

static __thread bool slack_set;
static __thread uint64_t slot_taken_ns; /* when this thread's request took its slot */

/* Take a server slot (if capped) and sleep the request's latency.  The clock
 * starts once the slot is held: a request queued for a busy server waits for a
 * slot, then pays the full service time. */
static void begin(enum kind k, enum op op)
{
	uint64_t ns = k == DATA ? cfg.data_ns : cfg.meta_ns;

	count(op, 1);
	if (cfg.max_inflight && sem_trywait(slots) != 0) {
		uint64_t t0 = stats ? now_ns() : 0;
		while (sem_wait(slots) != 0 && errno == EINTR)
			;
		count(STAT_SLOT_WAITS, 1);
		if (stats)
			count(STAT_SLOT_WAIT_NS, now_ns() - t0);
	}
	if (cfg.max_inflight && stats)
		slot_taken_ns = now_ns();
	if (ns == 0)
		return;
	if (!slack_set) {
		/* default timer slack is 50 us; 1 ns makes 0.5 ms sleeps honest */
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
		slack_set = true;
	}
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	uint64_t nsec = (uint64_t)t.tv_nsec + ns;
	t.tv_sec += (time_t)(nsec / 1000000000u);
	t.tv_nsec = (long)(nsec % 1000000000u);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
		;
}

static void end(void)
{
	if (cfg.max_inflight && stats)
		count(STAT_SLOT_BUSY_NS, now_ns() - slot_taken_ns);
	if (cfg.max_inflight)
		sem_post(slots);
}

/* --------------------------------------------------------------- helpers */

static void proc_path(char *buf, size_t len, int fd)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

static void fill_timeouts(struct fuse_entry_param *e)
{
	e->attr_timeout = cfg.cache_s;
	/* --casefold: the kernel caches entries by their exact name; every name is asked */
	e->entry_timeout = cfg.casefold ? 0 : cfg.cache_s;
}

/* ------------------------------------------------------------- casefold */

/* --casefold: names are matched ignoring ASCII case (strcasecmp in the C locale the daemon
 * runs in), as SMB shares, NTFS and APFS match them; each entry keeps the spelling it was
 * created with.  A name is resolved to the stored spelling before every operation on it;
 * creating operations take cf_lock across "is a name equal ignoring case there?" and the
 * create, so two writers can never create README and readme side by side. */
static pthread_mutex_t cf_lock = PTHREAD_MUTEX_INITIALIZER;

/* The spelling under which name is stored in dfd: the exact name if it exists, else the
 * first entry equal to it ignoring case.  0 with the spelling in out, or an errno. */
static int cf_find(int dfd, const char *name, char out[NAME_MAX + 1])
{
	struct stat st;
	if (strlen(name) > NAME_MAX)
		return ENAMETOOLONG;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		strcpy(out, name);
		return 0;
	}
	if (errno != ENOENT)
		return errno;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	DIR *dp = fdopendir(fd);
	if (!dp) {
		int err = errno;
		close(fd);
		return err;
	}
	int err = ENOENT;
	struct dirent *de;
	while ((de = readdir(dp)))
		if (strcasecmp(de->d_name, name) == 0) {
			strcpy(out, de->d_name);
			err = 0;
			break;
		}
	closedir(dp);
	return err;
}

/* The name to operate on: the stored spelling where one matches, else name itself. */
static const char *cf_name(int dfd, const char *name, char buf[NAME_MAX + 1])
{
	if (!cfg.casefold || cf_find(dfd, name, buf) != 0)
		return name;
	return buf;
}

/* Before creating name in dfd (cf_lock held): EEXIST when a name equal to it ignoring case
 * is there, 0 when it is free. */
static int cf_taken(int dfd, const char *name)
{
	char buf[NAME_MAX + 1];
	if (!cfg.casefold)
		return 0;
	int err = cf_find(dfd, name, buf);
	return err == 0 ? EEXIST : err == ENOENT ? 0 : err;
}

static void cf_begin(void)
{
	if (cfg.casefold)
		pthread_mutex_lock(&cf_lock);
}

static void cf_end(void)
{
	if (cfg.casefold)
		pthread_mutex_unlock(&cf_lock);
}

/* Give a newly created entry to the requesting user when it is not the
 * daemon's own (the daemon runs as root; clients may not). */
static void give_to_caller(fuse_req_t req, int dirfd, const char *name)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (ctx->uid == geteuid() && ctx->gid == getegid())
		return;
	struct stat dst;
	gid_t gid = ctx->gid;
	if (fstatat(dirfd, "", &dst, AT_EMPTY_PATH) == 0 && (dst.st_mode & S_ISGID))
		gid = (gid_t)-1; /* setgid directory: keep the inherited group */
	if (fchownat(dirfd, name, ctx->uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
		fprintf(stderr, "latencyfs: chown %s: %s\n", name, strerror(errno));
}

/* Look name up under parent, filling e and taking one lookup reference. */
static int do_lookup(fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	fill_timeouts(e);
	int fd = openat(inode_fd(parent), name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
		int err = errno;
		close(fd);
		return err;
	}
	bool used;
	struct inode *in = inode_ref(&e->attr, fd, &used);
	if (!used)
		close(fd);
	if (!in)
		return ENOMEM;
	e->ino = (fuse_ino_t)(uintptr_t)in;
	return 0;
}

static void reply_entry_or_err(fuse_req_t req, fuse_ino_t parent, const char *name, int err)
{
	struct fuse_entry_param e;
	if (err == 0)
		err = do_lookup(parent, name, &e);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

/* -------------------------------------------------------------- handlers */

static void lfs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* close-to-open: writes go to the server at once, symlinks are re-read */
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_CACHE_SYMLINKS);
	conn->max_background = cfg.max_background;
	conn->congestion_threshold = cfg.max_background * 3 / 4;
}

static void lfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	char buf[NAME_MAX + 1];
	int err = do_lookup(parent, cf_name(inode_fd(parent), name, buf), &e);
	if (err == ENOENT && cfg.cache_s > 0 && !cfg.casefold) {
		/* negative entry, cached like NFS's lookupcache=all */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = cfg.cache_s;
		fuse_reply_entry(req, &e);
	} else if (err) {
		fuse_reply_err(req, err);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void lfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	inode_unref(get_inode(ino), nlookup);
	fuse_reply_none(req);
}

static void lfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		inode_unref(get_inode(forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void lfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int res = fi ? fstat((int)fi->fh, &st)
		     : fstatat(inode_fd(ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	if (res != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, cfg.cache_s);
}

static void lfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
			struct fuse_file_info *fi)
{
	struct inode *in = get_inode(ino);
	char path[64];
	struct stat st;
	int res = 0;

	proc_path(path, sizeof(path), in->fd);
	if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
		goto fail;
	if (valid & FUSE_SET_ATTR_MODE) {
		res = fi ? fchmod((int)fi->fh, attr->st_mode) : chmod(path, attr->st_mode);
		if (res != 0)
			goto fail;
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
		if (fchownat(in->fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
			goto fail;
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		res = fi ? ftruncate((int)fi->fh, attr->st_size) : truncate(path, attr->st_size);
		if (res != 0)
			goto fail;
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		if (fi)
			res = futimens((int)fi->fh, tv);
		else if (S_ISLNK(st.st_mode))
			res = utimensat(in->fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
		else
			res = utimensat(AT_FDCWD, path, tv, 0);
		if (res != 0)
			goto fail;
	}
	if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
		goto fail;
	fuse_reply_attr(req, &st, cfg.cache_s);
	return;
fail:
	fuse_reply_err(req, errno);
}

static void lfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n = readlinkat(inode_fd(ino), "", buf, sizeof(buf));
	if (n < 0)
		fuse_reply_err(req, errno);
	else if ((size_t)n == sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

static void lfs_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	/* sent only without default_permissions: check as the daemon's user */
	char path[64];
	proc_path(path, sizeof(path), inode_fd(ino));
	fuse_reply_err(req, faccessat(AT_FDCWD, path, mask, AT_EACCESS) == 0 ? 0 : errno);
}

static void lfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	int dfd = inode_fd(parent);
	cf_begin();
	int err = cf_taken(dfd, name);
	if (!err)
		err = mknodat(dfd, name, mode, rdev) == 0 ? 0 : errno;
	cf_end();
	if (!err)
		give_to_caller(req, dfd, name);
	reply_entry_or_err(req, parent, name, err);
}

static void lfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	int dfd = inode_fd(parent);
	cf_begin();
	int err = cf_taken(dfd, name);
	if (!err)
		err = mkdirat(dfd, name, mode) == 0 ? 0 : errno;
	cf_end();
	if (!err)
		give_to_caller(req, dfd, name);
	reply_entry_or_err(req, parent, name, err);
}

static void lfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	int dfd = inode_fd(parent);
	cf_begin();
	int err = cf_taken(dfd, name);
	if (!err)
		err = symlinkat(link, dfd, name) == 0 ? 0 : errno;
	cf_end();
	if (!err)
		give_to_caller(req, dfd, name);
	reply_entry_or_err(req, parent, name, err);
}

static void lfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct inode *in = get_inode(ino);
	struct fuse_entry_param e;
	cf_begin();
	int taken = cf_taken(inode_fd(newparent), newname);
	int res = taken ? -1 : linkat(in->fd, "", inode_fd(newparent), newname, AT_EMPTY_PATH);
	if (!taken && res != 0 && errno == ENOENT) {
		/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; go through /proc */
		char path[64];
		proc_path(path, sizeof(path), in->fd);
		res = linkat(AT_FDCWD, path, inode_fd(newparent), newname, AT_SYMLINK_FOLLOW);
	}
	if (taken)
		errno = taken;
	cf_end();
	if (res != 0) {
		fuse_reply_err(req, errno);
		return;
	}
	memset(&e, 0, sizeof(e));
	fill_timeouts(&e);
	if (fstatat(in->fd, "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
		fuse_reply_err(req, errno);
		return;
	}
	inode_addref(in);
	e.ino = ino;
	fuse_reply_entry(req, &e);
}

static void lfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	char buf[NAME_MAX + 1];
	int dfd = inode_fd(parent);
	fuse_reply_err(req, unlinkat(dfd, cf_name(dfd, name, buf), 0) == 0 ? 0 : errno);
}

static void lfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	char buf[NAME_MAX + 1];
	int dfd = inode_fd(parent);
	fuse_reply_err(req, unlinkat(dfd, cf_name(dfd, name, buf), AT_REMOVEDIR) == 0 ? 0 : errno);
}

static void lfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	int from = inode_fd(parent), to = inode_fd(newparent);
	if (!cfg.casefold) {
		int res = renameat2(from, name, to, newname, flags);
		fuse_reply_err(req, res == 0 ? 0 : errno);
		return;
	}
	/* the source by its stored spelling; the target replaced under its stored spelling,
	 * then given the new one (a case-only rename just respells) */
	char src[NAME_MAX + 1], dst[NAME_MAX + 1];
	cf_begin();
	const char *old = cf_name(from, name, src);
	const char *over = cf_name(to, newname, dst);
	int res;
	if (from == to && !strcmp(old, over))
		res = renameat2(from, old, to, newname, flags & ~(unsigned)RENAME_NOREPLACE);
	else
		res = renameat2(from, old, to, over, flags);
	if (res == 0 && strcmp(over, newname) && !(flags & RENAME_EXCHANGE) && strcmp(old, over))
		res = renameat(to, over, to, newname);
	int err = res == 0 ? 0 : errno;
	cf_end();
	fuse_reply_err(req, err);
}

static void lfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];
	proc_path(path, sizeof(path), inode_fd(ino));
	/* O_NOFOLLOW was already honoured by the kernel; here it would stop us
	 * following the /proc magic link. */
	int fd = open(path, (fi->flags & ~(O_NOFOLLOW | O_CREAT | O_EXCL | O_NOCTTY)) | O_CLOEXEC);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = 0; /* close-to-open: drop cached pages on every open */
	fuse_reply_open(req, fi);
}

static void lfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	int dfd = inode_fd(parent);
	int flags = (fi->flags | O_CREAT | O_CLOEXEC) & ~O_NOCTTY;
	char buf[NAME_MAX + 1];
	cf_begin();
	/* --casefold: a name equal ignoring case is this file, already there */
	int fd = -1;
	const char *stored = cf_name(dfd, name, buf);
	if (stored != name) {
		name = stored;
		errno = EEXIST;
	} else {
		/* create exclusively first, so we know whether the file is new */
		fd = openat(dfd, name, flags | O_EXCL, mode);
	}
	bool created = fd >= 0;
	if (fd < 0 && errno == EEXIST && !(fi->flags & O_EXCL))
		fd = openat(dfd, name, flags & ~O_CREAT, mode);
	cf_end();
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	if (created)
		give_to_caller(req, dfd, name);
	struct fuse_entry_param e;
	int err = do_lookup(parent, name, &e);
	if (err) {
		close(fd);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &e, fi) != 0) {
		/* the kernel did not take the reply: drop what it will never forget */
		close(fd);
		inode_unref(get_inode(e.ino), 1);
	}
}

static void lfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	buf.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
	buf.buf[0].fd = (int)fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_NO_SPLICE);
}

static void lfs_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
			  struct fuse_file_info *fi)
{
	(void)ino;
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in_buf));
	out.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	ssize_t n = fuse_buf_copy(&out, in_buf, FUSE_BUF_NO_SPLICE);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void lfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	/* close a duplicate so the backing fs sees a close(), like NFS's CLOSE */
	int res = close(dup((int)fi->fh));
	fuse_reply_err(req, res == 0 ? 0 : errno);
}

static void lfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void lfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	int fd = (int)fi->fh;
	int res = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, res == 0 ? 0 : errno);
}

static void lfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			  struct fuse_file_info *fi)
{
	(void)ino;
	int res = fallocate((int)fi->fh, mode, off, len);
	fuse_reply_err(req, res == 0 ? 0 : errno);
}

struct dirh {
	DIR *dp;
	struct dirent *entry; /* read but not yet returned */
	off_t offset;
};

static void lfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dirh *d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int fd = openat(inode_fd(ino), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d->dp = fdopendir(fd))) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	fi->keep_cache = 0;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static void lfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
			struct fuse_file_info *fi)
{
	(void)ino;
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;
	int err = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				err = errno;
				break;
			}
		}
		struct stat st = {.st_ino = d->entry->d_ino, .st_mode = (mode_t)d->entry->d_type << 12};
		size_t n = fuse_add_direntry(req, buf + used, size - used, d->entry->d_name, &st,
					     d->entry->d_off);
		if (n > size - used)
			break;
		used += n;
		d->offset = d->entry->d_off;
		d->entry = NULL;
	}
	if (err && used == 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void lfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void lfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	int fd = dirfd(((struct dirh *)(uintptr_t)fi->fh)->dp);
	int res = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, res == 0 ? 0 : errno);
}

static void lfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	if (fstatvfs(inode_fd(ino), &sv) != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* ------------------------------------------- latency-charging wrappers */

#define W(kind, name, params, args)                                                        \
	static void w_##name params                                                        \
	{                                                                                  \
		begin(kind, OP_##name);                                                    \
		lfs_##name args;                                                           \
		end();                                                                     \
	}

W(META, lookup, (fuse_req_t r, fuse_ino_t p, const char *n), (r, p, n))
W(META, getattr, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f), (r, i, f))
W(META, setattr, (fuse_req_t r, fuse_ino_t i, struct stat *a, int v, struct fuse_file_info *f),
  (r, i, a, v, f))
W(META, readlink, (fuse_req_t r, fuse_ino_t i), (r, i))
W(META, access, (fuse_req_t r, fuse_ino_t i, int m), (r, i, m))
W(META, mknod, (fuse_req_t r, fuse_ino_t p, const char *n, mode_t m, dev_t d), (r, p, n, m, d))
W(META, link, (fuse_req_t r, fuse_ino_t i, fuse_ino_t p, const char *n), (r, i, p, n))
W(META, unlink, (fuse_req_t r, fuse_ino_t p, const char *n), (r, p, n))
W(META, rmdir, (fuse_req_t r, fuse_ino_t p, const char *n), (r, p, n))
W(META, rename,
  (fuse_req_t r, fuse_ino_t p, const char *n, fuse_ino_t np, const char *nn, unsigned int f),
  (r, p, n, np, nn, f))
W(META, open, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f), (r, i, f))
W(DATA, read, (fuse_req_t r, fuse_ino_t i, size_t s, off_t o, struct fuse_file_info *f),
  (r, i, s, o, f))
W(META, release, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f), (r, i, f))
W(META, fsync, (fuse_req_t r, fuse_ino_t i, int d, struct fuse_file_info *f), (r, i, d, f))
W(DATA, fallocate,
  (fuse_req_t r, fuse_ino_t i, int m, off_t o, off_t l, struct fuse_file_info *f),
  (r, i, m, o, l, f))
W(META, opendir, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f), (r, i, f))
W(META, readdir, (fuse_req_t r, fuse_ino_t i, size_t s, off_t o, struct fuse_file_info *f),
  (r, i, s, o, f))
W(META, releasedir, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f), (r, i, f))
W(META, fsyncdir, (fuse_req_t r, fuse_ino_t i, int d, struct fuse_file_info *f), (r, i, d, f))
W(META, statfs, (fuse_req_t r, fuse_ino_t i), (r, i))

/* The same, with a fault answered instead of the operation when one is due. */
#define FW(kind, name, params, args, due)                                                  \
	static void w_##name params                                                        \
	{                                                                                  \
		begin(kind, OP_##name);                                                    \
		if (due)                                                                   \
			fuse_reply_err(r, fault_errno);                                    \
		else                                                                       \
			lfs_##name args;                                                   \
		end();                                                                     \
	}

FW(META, mkdir, (fuse_req_t r, fuse_ino_t p, const char *n, mode_t m), (r, p, n, m),
   fault_name(FAULT_MKDIR, n))
FW(META, symlink, (fuse_req_t r, const char *l, fuse_ino_t p, const char *n), (r, l, p, n),
   fault_name(FAULT_SYMLINK, n))
FW(META, create, (fuse_req_t r, fuse_ino_t p, const char *n, mode_t m, struct fuse_file_info *f),
   (r, p, n, m, f), fault_name(FAULT_CREATE, n))
FW(DATA, write_buf,
   (fuse_req_t r, fuse_ino_t i, struct fuse_bufvec *b, off_t o, struct fuse_file_info *f),
   (r, i, b, o, f), fault_fd(FAULT_WRITE, (int)f->fh))
FW(META, flush, (fuse_req_t r, fuse_ino_t i, struct fuse_file_info *f), (r, i, f),
   fault_fd(FAULT_FLUSH, (int)f->fh))

static const struct fuse_lowlevel_ops ops = {
	.init = lfs_init,
	.lookup = w_lookup,
	.forget = lfs_forget,
	.forget_multi = lfs_forget_multi,
	.getattr = w_getattr,
	.setattr = w_setattr,
	.readlink = w_readlink,
	.access = w_access,
	.mknod = w_mknod,
	.mkdir = w_mkdir,
	.symlink = w_symlink,
	.link = w_link,
	.unlink = w_unlink,
	.rmdir = w_rmdir,
	.rename = w_rename,
	.open = w_open,
	.create = w_create,
	.read = w_read,
	.write_buf = w_write_buf,
	.flush = w_flush,
	.release = w_release,
	.fsync = w_fsync,
	.fallocate = w_fallocate,
	.opendir = w_opendir,
	.readdir = w_readdir,
	.releasedir = w_releasedir,
	.fsyncdir = w_fsyncdir,
	.statfs = w_statfs,
};

/* ------------------------------------------------------------------ main */

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--latency-ms F] [--data-latency-ms F] [--max-inflight N]\n"
		"          [--cache-seconds F] [--threads N] [--max-background N] [--no-clone-fd]\n"
		"          [--allow-other] [--casefold] [--fault-errno E] [--fault-ops LIST] [--fault-match S]\n"
		"          [--fault-times N] [--slots-name NAME] [--stats FILE] [-f] [-d] [-o OPTS]\n"
		"          BACKING_DIR MOUNTPOINT\n",
		prog);
}

static bool parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < 0)
		return false;
	*out = v;
	return true;
}

static bool parse_uint(const char *s, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > 1000000)
		return false;
	*out = (unsigned)v;
	return true;
}

static uint64_t ms_to_ns(double ms)
{
	return (uint64_t)(ms * 1e6 + 0.5);
}

static int parse_errno(const char *s)
{
	static const struct { const char *name; int value; } names[] = {
		{"EIO", EIO}, {"ESTALE", ESTALE}, {"EAGAIN", EAGAIN}, {"EINTR", EINTR},
		{"ETIMEDOUT", ETIMEDOUT}, {"ENOSPC", ENOSPC},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name))
			return names[i].value;
	unsigned v;
	return parse_uint(s, &v) && v > 0 && v < 4096 ? (int)v : 0;
}

static bool parse_ops(const char *s, unsigned *out)
{
	static const struct { const char *name; unsigned bit; } names[] = {
		{"create", FAULT_CREATE}, {"mkdir", FAULT_MKDIR}, {"symlink", FAULT_SYMLINK},
		{"write", FAULT_WRITE}, {"flush", FAULT_FLUSH},
	};
	unsigned bits = 0;
	while (*s) {
		size_t len = strcspn(s, ",");
		bool found = false;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == len && !strncmp(s, names[i].name, len)) {
				bits |= names[i].bit;
				found = true;
			}
		if (!found)
			return false;
		s += len + (s[len] == ',');
	}
	*out = bits;
	return bits != 0;
}

static int parse_args(int argc, char **argv)
{
	const char *pos[2];
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		double d;
		if (!strcmp(a, "-f")) {
			cfg.foreground = true;
		} else if (!strcmp(a, "-d")) {
			cfg.debug = cfg.foreground = true;
		} else if (!strcmp(a, "--no-clone-fd")) {
			cfg.clone_fd = false;
		} else if (!strcmp(a, "--allow-other")) {
			cfg.allow_other = true;
		} else if (!strcmp(a, "--casefold")) {
			cfg.casefold = true;
		} else if (a[0] == '-' && !v) {
			fprintf(stderr, "latencyfs: %s needs a value\n", a);
			return -1;
		} else if (!strcmp(a, "-o")) {
			cfg.extra_opts = v, i++;
		} else if (!strcmp(a, "--latency-ms")) {
			if (!parse_double(v, &d))
				goto bad;
			cfg.meta_ns = ms_to_ns(d), i++;
		} else if (!strcmp(a, "--data-latency-ms")) {
			if (!parse_double(v, &d))
				goto bad;
			cfg.data_ns = ms_to_ns(d), i++;
		} else if (!strcmp(a, "--cache-seconds")) {
			if (!parse_double(v, &cfg.cache_s))
				goto bad;
			i++;
		} else if (!strcmp(a, "--max-inflight")) {
			if (!parse_uint(v, &cfg.max_inflight))
				goto bad;
			i++;
		} else if (!strcmp(a, "--fault-errno")) {
			if (!(fault_errno = parse_errno(v)))
				goto bad;
			i++;
		} else if (!strcmp(a, "--fault-ops")) {
			if (!parse_ops(v, &fault_ops))
				goto bad;
			i++;
		} else if (!strcmp(a, "--fault-match")) {
			fault_match = v, i++;
		} else if (!strcmp(a, "--fault-times")) {
			unsigned n;
			if (!parse_uint(v, &n))
				goto bad;
			fault_left = (long)n, i++;
		} else if (!strcmp(a, "--slots-name")) {
			if (v[0] != '/' || strchr(v + 1, '/'))
				goto bad;
			slots_name = v, i++;
		} else if (!strcmp(a, "--stats")) {
			stats_path = v, i++;
		} else if (!strcmp(a, "--threads")) {
			if (!parse_uint(v, &cfg.threads) || cfg.threads < 2)
				goto bad;
			i++;
		} else if (!strcmp(a, "--max-background")) {
			if (!parse_uint(v, &cfg.max_background) || cfg.max_background < 1 ||
			    cfg.max_background > 65535)
				goto bad;
			i++;
		} else if (a[0] == '-') {
			fprintf(stderr, "latencyfs: unknown option %s\n", a);
			return -1;
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			fprintf(stderr, "latencyfs: too many arguments\n");
			return -1;
		}
		continue;
bad:
		fprintf(stderr, "latencyfs: bad value for %s: %s\n", a, v);
		return -1;
	}
	if (npos != 2)
		return -1;
	if (cfg.data_ns == UINT64_MAX)
		cfg.data_ns = cfg.meta_ns;
	/* daemonizing changes the working directory to / */
	cfg.backing = realpath(pos[0], NULL);
	cfg.mountpoint = realpath(pos[1], NULL);
	if (!cfg.backing || !cfg.mountpoint) {
		fprintf(stderr, "latencyfs: %s: %s\n", cfg.backing ? pos[1] : pos[0], strerror(errno));
		return -2;
	}
	return 0;
}

static void raise_nofile(void)
{
	/* one O_PATH fd per inode the kernel remembers: allow as many as we may */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	FILE *f = fopen("/proc/sys/fs/nr_open", "r");
	unsigned long nr_open;
	if (f && fscanf(f, "%lu", &nr_open) == 1 && nr_open > rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max = nr_open;
		setrlimit(RLIMIT_NOFILE, &rl); /* succeeds only as root; fine otherwise */
	}
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	int rc = parse_args(argc, argv);
	if (rc == -1)
		usage(argv[0]);
	if (rc != 0)
		return 2;

	if (stats_path && open_stats() != 0)
		return 1;
	umask(0); /* the kernel has applied the caller's umask already */
	raise_nofile();
	buckets = calloc(INODE_BUCKETS, sizeof(*buckets));
	if (!buckets) {
		fprintf(stderr, "latencyfs: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < INODE_STRIPES; i++)
		pthread_mutex_init(&stripes[i], NULL);
	if (cfg.max_inflight && !slots_name) {
		sem_init(slots, 0, cfg.max_inflight);
	} else if (cfg.max_inflight) {
		slots = sem_open(slots_name, O_CREAT, 0600, cfg.max_inflight);
		if (slots == SEM_FAILED) {
			fprintf(stderr, "latencyfs: sem_open %s: %s\n", slots_name, strerror(errno));
			return 1;
		}
	}

	root_inode.fd = open(cfg.backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_inode.fd < 0) {
		fprintf(stderr, "latencyfs: %s: %s\n", cfg.backing, strerror(errno));
		return 1;
	}
	root_inode.nlookup = 2;

	char opts[512];
	/* By default only the mounting user (and root) may enter, and the
	 * daemon, running as that user, gets the backing fs's permission checks
	 * for free.  --allow-other lets everyone in; the kernel then checks modes
	 * itself (default_permissions), which costs an extra GETATTR of the
	 * directory after every change in it (its attributes are invalidated and
	 * the next permission check refetches them), a round trip NFS does not
	 * pay (its replies carry the directory's new attributes). */
	snprintf(opts, sizeof(opts), "fsname=latencyfs,subtype=latencyfs%s",
		 cfg.allow_other ? ",allow_other,default_permissions" : "");
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	if (fuse_opt_add_arg(&args, argv[0]) || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts) ||
	    (cfg.extra_opts && (fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, cfg.extra_opts))) ||
	    (cfg.debug && fuse_opt_add_arg(&args, "-d"))) {
		fprintf(stderr, "latencyfs: out of memory\n");
		return 1;
	}

	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	rc = 1;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy;
	if (fuse_session_mount(se, cfg.mountpoint) != 0)
		goto out_signals;
	/* the parent exits only once the mount exists */
	if (fuse_daemonize(cfg.foreground) != 0)
		goto out_unmount;

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_unmount;
	fuse_loop_cfg_set_clone_fd(lc, cfg.clone_fd);
	fuse_loop_cfg_set_max_threads(lc, cfg.threads);
	/* keep every thread once started: thread churn under bursty load costs
	 * more than idle stacks */
	fuse_loop_cfg_set_idle_threads(lc, cfg.threads);
	rc = fuse_session_loop_mt(se, lc) != 0;
	fuse_loop_cfg_destroy(lc);

out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc;
}
