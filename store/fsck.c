/*
 * fsck.c: the check and repair of an unmounted store (fsck.h): opening
 * it, the header, and on the pages backend the bucket files' sizes, one
 * walk over the mappings rebuilding the bitmaps and checksumming each
 * object (through the backend, or from the files themselves when one is
 * damaged), then the clean snapshot against the rebuild.  A KV backend's
 * store is checked by fsck_kv.c.  Repairs run in one metadata
 * transaction; restored bucket files only after it.
 */
#include "fsck_int.h"
#include "epoch.h"
#include "store_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvb_hash.h"

#include "alloc.h"
#include "store.h"
#include "vec.h"

/* ---- the check ---- */


/* The object's checksum from the bucket file itself: when a damaged bucket stops kvb. */
/*
 * Whether in's bytes, read from its bucket file, match its checksum of
 * either kind (kvb_hash.h): 1, 0 or -errno; *csum gets the bytes' sum.
 */
static int fsck_csum_fd(struct fsck *f, const struct meta_inode *in, uint64_t *csum)
{
	XXH3_state_t *st = XXH3_createState(), *bp = XXH3_createState();
	size_t chunk = (1 << 20) / f->geom.page_size * f->geom.page_size;
	char *buf = malloc(chunk ? chunk : f->geom.page_size);
	uint64_t done = 0, off = in->page * f->geom.page_size;
	int fd = f->bucket_fd[in->bucket], ret = 0;

	if (!chunk)
		chunk = f->geom.page_size;
	if (!st || !buf || !bp) {
		ret = -ENOMEM;
		goto out;
	}
	XXH3_64bits_reset(st);
	XXH3_64bits_reset(bp);
	while (done < in->size) {
		size_t len = in->size - done < chunk ? (size_t)(in->size - done) : chunk, got = 0;

		/* Whole pages per chunk, so the page sums line up. */
		while (got < len) {
			ssize_t n = fd >= 0 ? pread(fd, buf + got, len - got,
						    (off_t)(off + done + got)) : -1;

			if (n <= 0) {
				ret = n < 0 ? -errno : -EIO;
				goto out;
			}
			got += (size_t)n;
		}
		XXH3_64bits_update(st, buf, len);
		kvb_pages_sum_update(bp, buf, len, f->geom.page_size);
		done += len;
	}
	*csum = XXH3_64bits_digest(st);
	ret = *csum == in->csum || XXH3_64bits_digest(bp) == in->csum;
out:
	free(buf);
	XXH3_freeState(st);
	XXH3_freeState(bp);
	return ret;
}

static int fsck_map(void *ctx, const struct meta_inode *in)
{
	struct fsck *f = ctx;
	char key[4096];
	uint64_t tenant;
	int ret;

	f->objects++;
	f->prog.done++;
	ofs_progress_show(&f->prog, 0);
	if (!fsck_reachable(f, in, &tenant)) {
		ofs_progress_clear(&f->prog);
		fprintf(f->out, "inode %" PRIu64 ": unreachable: its parent %" PRIu64 " is gone or not a "
		       "directory; %s\n", in->ino, in->parent,
		       tenant ? "--repair moves it to its tenant's lost+found"
			      : "no tenant holds it: --repair deletes it and frees its pages");
		f->unreachable++;
		if (!tenant) {
			/* Its pages are left out of the rebuild: the repair frees them. */
			(void)vec_u64_push(&f->orphans, &f->norphans, &f->caporphans, in->ino);
			return 0;
		}
		fsck_note_corrupt(f, in->ino);
	}
	if (in->state == META_QUARANTINED) {
		f->quarantined++;
		/* It yields shared pages to their intact owner, as the mount does. */
		if (in->bucket >= 0 && (uint32_t)in->bucket < f->geom.bucket_count)
			alloc_mark(&f->rebuilt[in->bucket], in->page, in->npages);
		return 0;
	}
	if (in->bucket < 0 || (uint32_t)in->bucket >= f->geom.bucket_count) {
		fprintf(f->out, "inode %" PRIu64 ": bucket %d out of range\n", in->ino, in->bucket);
		f->out_of_range++;
		return 0;
	}
	ret = alloc_mark(&f->rebuilt[in->bucket], in->page, in->npages);
	if (ret) {
		fsck_key(f->meta, in->ino, key, sizeof(key), &tenant);
		fprintf(f->out, "inode %" PRIu64 " '%s': bucket %d pages %" PRIu64 "+%" PRIu64 " %s\n",
		       in->ino, key, in->bucket, in->page, in->npages,
		       ret == -EEXIST ? "overlap another object" : "are past the end of the bucket");
		if (ret == -EEXIST)
			f->overlaps++;
		else
			f->out_of_range++;
	}
	if ((in->page + in->npages) * f->geom.page_size > f->bucket_bytes[in->bucket]) {
		fsck_key(f->meta, in->ino, key, sizeof(key), &tenant);
		fprintf(f->out, "inode %" PRIu64 " '%s': ends past the end of bucket file %02x (%" PRIu64
		       " bytes)\n",
		       in->ino, key, in->bucket, f->bucket_bytes[in->bucket]);
		f->past_eof++;
		fsck_note_corrupt(f, in->ino);
		return 0;
	}
	if ((f->have_kvb || f->bucket_fd) && ret != -EINVAL) {
		struct kvb_map map = { in->bucket, in->page, in->npages, in->size, NULL };
		uint64_t csum;

		if (f->bucket_bytes[in->bucket] == UINT64_MAX)
			return 0; /* not a regular file: not read, reported with the buckets */
		ret = f->have_kvb ? kvb_checksum_ok(&f->kvb, &map, in->csum, &csum)
				  : fsck_csum_fd(f, in, &csum);
		if (ret < 0) {
			fprintf(f->out, "inode %" PRIu64 ": cannot read: %s\n", in->ino, strerror(-ret));
			f->io_errors++;
		} else if (!ret) {
			fsck_key(f->meta, in->ino, key, sizeof(key), &tenant);
			/* As recovery does: an empty durable version (-2) counts too. */
			if (in->gen > f->synced_gen && (in->prev_bucket >= 0 || in->prev_bucket == -2)) {
				/* Lost to a power cut before its barrier: the mount reverts it. */
				fprintf(f->out, "inode %" PRIu64 " '%s': unsynced version does not match its "
				       "checksum; the next mount falls back to the last synced version\n",
				       in->ino, key);
				f->unsynced_bad++;
			} else {
				fprintf(f->out, "inode %" PRIu64 " '%s': checksum mismatch (bucket %d offset %" PRIu64
				       " size %" PRIu64 ")\n",
				       in->ino, key, in->bucket, in->page * f->geom.page_size, in->size);
				f->bad_csum++;
				fsck_note_corrupt(f, in->ino);
			}
		}
	}
	return 0;
}

static int fsck_open(const char *root, const char *meta_path, int repair, struct fsck *f,
		     int *lock_fd)
{
	char err[1024], path[4096], shown[4096];
	struct stat st;
	int ret;

	if (stat(root, &st) || !S_ISDIR(st.st_mode)) {
		fsck_err(f, "ROOT %s: %s\n", root,
			errno && stat(root, &st) ? strerror(errno) : "not a directory");
		return 2;
	}
	ret = ofs_store_lock(root, lock_fd, err, sizeof(err));
	if (ret) {
		fsck_err(f, "%s%s\n", err,
			ret == -EBUSY ? "; unmount it first" : "");
		return 2;
	}
	/* A repair may change what a batch client's kept descriptors name. */
	if (repair)
		ofs_epochs_retire(*lock_fd, root);
	if (!meta_path) {
		snprintf(path, sizeof(path), "%s/%s", root, OFS_DB_NAME);
		meta_path = path;
	}
	/* Without --repair nothing is written: not even a schema upgrade. */
	/* On a full disk, the reserve is what lets sqlite replay its log and a repair write. */
	if (!meta_is_remote(meta_path) && access(meta_path, F_OK) && errno == ENOENT) {
		fsck_err(f, "%s does not exist: no store to check; not touched\n", meta_path);
		return 2;
	}
	ofs_reserve_give_back(meta_path);
	ret = meta_open(meta_path, repair ? 0 : META_OPEN_NO_MIGRATE, &f->meta, err, sizeof(err));
	/* From here messages name a URI without its password. */
	meta_target_show(meta_path, shown, sizeof(shown));
	meta_path = shown;
	if (ret < 0) {
		fsck_err(f, "%s: %s; not touched\n", meta_path, err);
		return 2;
	}
	ret = meta_geom_get(f->meta, &f->geom, f->backend, sizeof(f->backend));
	if (ret == -ENOENT) {
		fsck_err(f, "%s: the store was never formatted\n", meta_path);
		return 2;
	}
	/* The daemon's own check: a geometry it refuses to mount is never "clean". */
	if (ret || ofs_geom_valid(&f->geom, err, sizeof(err))) {
		fsck_err(f, "%s: damaged geometry record: %s; not touched\n",
			meta_path, ret ? "a value is not a positive number in range" : err);
		return 2;
	}
	{
		int pending;

		/* Another store's database would make every object look damaged, and a repair drop them. */
		if (ofs_identity_check(root, f->meta, meta_path, 0, &pending, err, sizeof(err))) {
			fsck_err(f, "%s; not touched\n", err);
			return 2;
		}
	}
	if (strcmp(f->backend, "pages") && strcmp(f->backend, "ubsio")) {
		fsck_err(f, "%s: the store uses backend '%s', which this build "
				"lacks; not touched\n", meta_path, f->backend);
		return 2;
	}
	/*
	 * The walk below reads the table, not its indexes: a damaged index
	 * (every lookup of the mount failing with EUCLEAN) would pass it.
	 * A repair never writes into a damaged database.
	 */
	ret = meta_integrity(f->meta, err, sizeof(err));
	if (ret) {
		fsck_err(f, "%s: the database is damaged (sqlite's integrity_check: %s%s); not "
			    "touched: restore it from a copy, or rebuild it with sqlite3's .recover\n",
			 meta_path, err, ret > 1 ? ", and more" : "");
		return 2;
	}
	return 0;
}

/*
 * Disk blocks held by pages no object uses (a free whose punch a crash
 * cut short, a store written before frees were punched).  Reported, not a
 * problem; punched with punch set, which the caller allows only for a
 * cleanly unmounted store: after a crash, recovery may still fall back to
 * a previous version in pages no record holds.
 */
static void fsck_free_space(struct fsck *f, const char *root, uint64_t npages, int punch)
{
	uint64_t ps = f->geom.page_size, held = 0, punched = 0;
	char path[4096], name[32];
	uint32_t b;

	for (b = 0; b < f->geom.bucket_count; b++) {
		off_t data = 0, hole;
		int fd;

		kvb_bucket_name(b, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", root, name);
		fd = open(path, (punch ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		while ((data = lseek(fd, data, SEEK_DATA)) >= 0) {
			uint64_t p, start = 0, run = 0;

			hole = lseek(fd, data, SEEK_HOLE);
			if (hole <= data)
				break;
			/* Page by page: a page partly in the extent holds blocks too. */
			for (p = (uint64_t)data / ps; p * ps < (uint64_t)hole && p < npages; p++) {
				int unused = !alloc_test(&f->rebuilt[b], p);
				int last = (p + 1) * ps >= (uint64_t)hole || p + 1 == npages;

				if (unused) {
					if (!run)
						start = p;
					run++;
					held++;
				}
				if (run && (!unused || last)) {
					if (punch && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
							       (off_t)(start * ps), (off_t)(run * ps)) == 0)
						punched += run;
					run = 0;
				}
			}
			data = hole;
		}
		close(fd);
	}
	fprintf(f->out, "free pages holding disk blocks: %" PRIu64 " (%" PRIu64 " KiB)%s\n", held,
	       held * ps / 1024,
	       punch ? "" : held ? "; fsck --repair of a cleanly unmounted store gives them back" : "");
	if (punch)
		fprintf(f->out, "repair: gave %" PRIu64 " free page(s) back to the filesystem\n", punched);
}

/*
 * Bucket files past the store's count: another store's (the mount refuses
 * them).  Named, counted as problems; a repair leaves them to the operator.
 */
static int fsck_stray_buckets(struct fsck *f, int root_fd)
{
	struct dirent *de;
	int fd = dup(root_fd), n = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		char *end;
		unsigned long idx;

		if (strlen(name) != 14 || strncmp(name, "bucket_", 7) || strcmp(name + 9, ".data") ||
		    !isxdigit((unsigned char)name[7]) || !isxdigit((unsigned char)name[8]) ||
		    isupper((unsigned char)name[7]) || isupper((unsigned char)name[8]))
			continue;
		idx = strtoul(name + 7, &end, 16);
		if (idx < f->geom.bucket_count)
			continue;
		fprintf(f->out, "%s: past the store's %u bucket file(s), not this store's; move it "
			       "out of ROOT (the mount refuses it)\n", name, f->geom.bucket_count);
		n++;
	}
	closedir(d);
	return n;
}

int ofs_fsck(const struct ofs_config *cfg, int repair, FILE *out, FILE *err)
{
	const char *root = cfg->root;
	struct fsck fs = { .out = out, .err = err }, *f = &fs;
	struct kvb_pages_geom pg;
	char msg[1024];
	uint64_t npages, snap_diff = 0, leaked = 0, missing = 0, n_new = 0, n_orphans = 0, stray = 0;
	uint64_t files = 0;
	int lock_fd = -1, clean = 0, problems = 0, ret, have_snapshot = 1, bucket_problems = 0;
	int restorable = 0, unrepairable = 0;
	uint32_t b;

	ret = fsck_open(root, cfg->meta_path, repair, f, &lock_fd);
	if (ret)
		goto out;
	meta_clean_get(f->meta, &clean);
	meta_synced_gen(f->meta, &f->synced_gen);
	/* The progress's total: what the walk below visits (no empty file, no unfinished write). */
	meta_count_mappings(f->meta, &files);
	if (!strcmp(f->backend, "ubsio"))
		fprintf(f->out, "store %s: backend ubsio, page_size %" PRIu64 ", schema %d, %s\n", root,
		       f->geom.page_size, META_SCHEMA_VERSION,
		       clean ? "cleanly unmounted" : "not cleanly unmounted");
	else
		fprintf(f->out, "store %s: page_size %" PRIu64 ", bucket_size %" PRIu64 ", bucket_count %u, "
		       "schema %d, %s\n",
		       root, f->geom.page_size, f->geom.bucket_size, f->geom.bucket_count,
		       META_SCHEMA_VERSION, clean ? "cleanly unmounted" : "not cleanly unmounted");
	if (!clean && meta_count_unsettled(f->meta, &n_new, &n_orphans) == 0 && (n_new || n_orphans))
		fprintf(f->out, "unfinished writes %" PRIu64 ", unlinked-open files %" PRIu64
		       ": the next mount drops them\n",
		       n_new, n_orphans);
	if (!strcmp(f->backend, "ubsio")) {
		ret = fsck_kv(f, cfg, repair);
		goto out;
	}
	if (cfg->ubsio.lib || cfg->ubsio.new_init >= 0 ||
	    cfg->ubsio.device_id != KVB_UBSIO_DEVICE_UNSET)
		fsck_err(f, "the store uses the pages backend: --ubsio-* ignored\n");

	/*
	 * Bucket files: present, regular, at least bucket_size.  Never through
	 * a symbolic link.  A missing or truncated one is what --repair
	 * restores: objects past its end are quarantined, the rest checked.
	 */
	f->bucket_bytes = calloc(f->geom.bucket_count, sizeof(*f->bucket_bytes));
	for (b = 0; b < f->geom.bucket_count; b++) {
		struct stat st;
		char name[32];

		kvb_bucket_name(b, name, sizeof(name));
		if (fstatat(lock_fd, name, &st, AT_SYMLINK_NOFOLLOW)) {
			fprintf(f->out, "%s: missing\n", name);
			bucket_problems++;
			restorable++;
		} else if (!S_ISREG(st.st_mode)) {
			fprintf(f->out, "%s: %s, not a regular file; remove it (objects in it are not "
			       "checked)\n", name, S_ISLNK(st.st_mode) ? "a symbolic link" : "not a file");
			f->bucket_bytes[b] = UINT64_MAX;
			bucket_problems++;
			unrepairable++;
		} else {
			f->bucket_bytes[b] = (uint64_t)st.st_size;
			if ((uint64_t)st.st_size < f->geom.bucket_size) {
				fprintf(f->out, "%s: %lld bytes, expected %" PRIu64 " (truncated)\n", name,
				       (long long)st.st_size, f->geom.bucket_size);
				bucket_problems++;
				restorable++;
			}
		}
	}
	problems += bucket_problems;
	ret = fsck_stray_buckets(f, lock_fd);
	problems += ret;
	unrepairable += ret;
	pg.page_size = f->geom.page_size;
	pg.bucket_size = f->geom.bucket_size;
	pg.bucket_count = f->geom.bucket_count;
	pg.keep_free = 0;
	if (!bucket_problems) {
		if (kvb_pages_init(&f->kvb, root, &pg, 0, msg, sizeof(msg)) == 0) {
			f->have_kvb = 1;
		} else {
			fprintf(f->out, "cannot open the bucket files: %s\n", msg);
			problems++;
		}
	} else {
		/* The intact bytes are still checked, straight from the files. */
		f->bucket_fd = malloc(f->geom.bucket_count * sizeof(*f->bucket_fd));
		for (b = 0; f->bucket_fd && b < f->geom.bucket_count; b++) {
			char name[32];

			kvb_bucket_name(b, name, sizeof(name));
			f->bucket_fd[b] = f->bucket_bytes[b] == UINT64_MAX ? -1
				: openat(lock_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		}
	}

	npages = f->geom.bucket_size / f->geom.page_size;
	f->rebuilt = calloc(f->geom.bucket_count, sizeof(*f->rebuilt));
	for (b = 0; b < f->geom.bucket_count; b++)
		alloc_init(&f->rebuilt[b], npages);
	ofs_progress_start(&f->prog, "fsck", files, f->err, f->out);
	ret = meta_foreach_mapping(f->meta, fsck_map, f);
	ofs_progress_show(&f->prog, 1);
	if (ret) {
		fprintf(f->out, "cannot read the mappings: %s\n", meta_errmsg(f->meta));
		problems++;
	}

	/* The snapshot a clean unmount left must equal the rebuild, bit for bit. */
	if (clean) {
		uint64_t *w = malloc(f->rebuilt[0].nwords * sizeof(uint64_t));

		for (b = 0; b < f->geom.bucket_count && w; b++) {
			struct alloc snap;
			uint64_t p;

			if (meta_bitmap_load(f->meta, b, npages, w, f->rebuilt[b].nwords) ||
			    alloc_init(&snap, npages)) {
				have_snapshot = 0;
				break;
			}
			if (alloc_load(&snap, w, f->rebuilt[b].nwords)) {
				have_snapshot = 0;
				alloc_release(&snap);
				break;
			}
			if (!alloc_equal(&snap, &f->rebuilt[b])) {
				snap_diff++;
				for (p = 0; p < npages; p++) {
					int s = alloc_test(&snap, p), r = alloc_test(&f->rebuilt[b], p);

					leaked += s && !r;
					missing += !s && r;
				}
			}
			alloc_release(&snap);
		}
		free(w);
		if (!have_snapshot) {
			fprintf(f->out, "clean flag set but the bitmap snapshot is missing or malformed\n");
			problems++;
		} else if (snap_diff) {
			fprintf(f->out, "bitmap snapshot differs from the mappings in %" PRIu64 " bucket(s): %" PRIu64
			       " leaked page(s), %" PRIu64 " page(s) in use but free in the snapshot\n",
			       snap_diff, leaked, missing);
			problems++;
		} else {
			fprintf(f->out, "bitmap snapshot: identical to the bitmaps rebuilt from the mappings\n");
		}
	}
	if (!bucket_problems)
		fsck_free_space(f, root, npages, repair && clean);
	if (meta_extents_stray(f->meta, 0, &stray) == 0 && stray) {
		fprintf(f->out, "%" PRIu64 " extent record(s) of no file (their pages are counted free)%s\n",
			stray, repair ? "" : "; --repair deletes them");
		problems++;
	}
	problems += (int)(f->overlaps + f->out_of_range + f->past_eof + f->bad_csum + f->io_errors +
			  f->unreachable);
	fprintf(f->out, "objects %" PRIu64 ", overlaps %" PRIu64 ", out of range %" PRIu64
	       ", past end of bucket file %" PRIu64 ", checksum mismatches %" PRIu64
	       ", read errors %" PRIu64 ", unreachable %" PRIu64 ", leaked pages %" PRIu64
	       ", quarantined %" PRIu64 "%s\n",
	       f->objects, f->overlaps, f->out_of_range, f->past_eof, f->bad_csum, f->io_errors,
	       f->unreachable, leaked, f->quarantined,
	       f->have_kvb || f->bucket_fd ? "" : " (checksums not checked)");

	if (repair && problems) {
		size_t i;
		int fixed = 1;

		ret = meta_begin(f->meta);
		for (i = 0; !ret && i < f->ncorrupt; i++)
			ret = fsck_quarantine(f, f->corrupt[i]);
		/* Nothing can reach them: deleted, their pages (left out of the rebuild) freed. */
		for (i = 0; !ret && i < f->norphans; i++) {
			ret = meta_delete(f->meta, f->orphans[i]);
			if (!ret)
				fprintf(f->out, "repair: unreachable inode %" PRIu64 " deleted\n", f->orphans[i]);
		}
		if (!ret && stray) {
			ret = meta_extents_stray(f->meta, 1, &stray);
			if (!ret)
				fprintf(f->out, "repair: deleted %" PRIu64 " extent record(s) of no file\n",
					stray);
		}
		/* Leaked pages: the snapshot is replaced by the rebuild (or the mount rebuilds). */
		if (!ret && clean && (snap_diff || !have_snapshot)) {
			for (b = 0; !ret && b < f->geom.bucket_count; b++)
				ret = meta_bitmap_save(f->meta, b, npages, f->rebuilt[b].words,
						       f->rebuilt[b].nwords);
			if (!ret)
				fprintf(f->out, "repair: freed %" PRIu64 " leaked page(s)\n", leaked);
		}
		if (!ret)
			ret = meta_commit(f->meta);
		else
			meta_rollback(f->meta);
		if (ret) {
			fprintf(f->out, "repair failed: %s; nothing changed\n", meta_errmsg(f->meta));
			fixed = 0;
		}
		if (f->overlaps && fixed)
			fprintf(f->out, "repair: overlapping objects that failed their checksum are in "
			       "lost+found; they yield the shared pages to the intact object\n");
		/* After the quarantine is durable: the zeros it brings back then belong to nobody. */
		for (b = 0; fixed && restorable && b < f->geom.bucket_count; b++) {
			char name[32];
			int fd;

			if (f->bucket_bytes[b] >= f->geom.bucket_size)
				continue;
			kvb_bucket_name(b, name, sizeof(name));
			fd = openat(lock_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 || ftruncate(fd, (off_t)f->geom.bucket_size) || fsync(fd)) {
				fprintf(f->out, "repair: cannot restore %s to %" PRIu64 " bytes: %s\n", name,
				       f->geom.bucket_size, strerror(errno));
				unrepairable++;
			} else {
				fprintf(f->out, "repair: %s restored to %" PRIu64 " bytes; the objects it lost "
				       "were moved to lost+found\n", name, f->geom.bucket_size);
			}
			if (fd >= 0)
				close(fd);
		}
		if (fixed && restorable)
			fsync(lock_fd);
		if (fixed && !unrepairable && !f->io_errors &&
		    f->overlaps + f->out_of_range <= f->ncorrupt)
			problems = 0;
	}
	fprintf(f->out, "%s\n", problems ? "fsck: PROBLEMS FOUND" : "fsck: clean");
	ret = problems ? 1 : 0;
out:
	for (b = 0; f->rebuilt && b < f->geom.bucket_count; b++)
		alloc_release(&f->rebuilt[b]);
	free(f->rebuilt);
	free(f->bucket_bytes);
	for (b = 0; f->bucket_fd && b < f->geom.bucket_count; b++)
		if (f->bucket_fd[b] >= 0)
			close(f->bucket_fd[b]);
	free(f->bucket_fd);
	free(f->orphans);
	free(f->corrupt);
	free(f->keyed);
	free(f->batch);
	kvb_release(&f->kvb);
	meta_close(f->meta);
	if (lock_fd >= 0)
		close(lock_fd);
	return ret;
}
