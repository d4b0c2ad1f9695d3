/*
 * offloadctl: operator commands for an offloadfs store.
 *
 *   offloadctl fsck ROOT [--meta PATH]   check an unmounted store (read-only)
 *
 * fsck never writes: it takes the same exclusive lock on ROOT as the daemon
 * (so it refuses a mounted store), opens the metadata read-only, rebuilds
 * the bitmaps from the mappings, compares them with the clean-unmount
 * snapshot, and verifies every committed object's checksum.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "kvb.h"
#include "meta.h"
#include "store.h"

struct fsck {
	struct meta *meta;
	struct meta_geom geom;
	struct alloc *rebuilt;
	struct kvb kvb;
	uint64_t objects, overlaps, out_of_range, bad_csum, io_errors;
	int have_kvb;
};

static int fsck_map(void *ctx, uint64_t ino, int32_t bucket, uint64_t page, uint64_t npages)
{
	struct fsck *f = ctx;
	int ret;

	f->objects++;
	if (bucket < 0 || (uint32_t)bucket >= f->geom.bucket_count) {
		printf("inode %llu: bucket %d out of range\n", (unsigned long long)ino, bucket);
		f->out_of_range++;
		return 0;
	}
	ret = alloc_mark(&f->rebuilt[bucket], page, npages);
	if (ret == -EEXIST) {
		printf("inode %llu: bucket %d pages %llu+%llu overlap another object\n",
		       (unsigned long long)ino, bucket, (unsigned long long)page,
		       (unsigned long long)npages);
		f->overlaps++;
	} else if (ret) {
		printf("inode %llu: bucket %d pages %llu+%llu past the end of the bucket\n",
		       (unsigned long long)ino, bucket, (unsigned long long)page,
		       (unsigned long long)npages);
		f->out_of_range++;
	} else if (f->have_kvb) {
		struct meta_inode m;
		struct kvb_map map;
		uint64_t csum;

		if (meta_get(f->meta, ino, &m))
			return 0;
		map = (struct kvb_map){ m.bucket, m.page, m.npages, m.size };
		ret = f->kvb.ops->checksum(f->kvb.arg, &map, &csum);
		if (ret) {
			printf("inode %llu: cannot read: %s\n", (unsigned long long)ino,
			       strerror(-ret));
			f->io_errors++;
		} else if (csum != m.csum) {
			printf("inode %llu: checksum mismatch (bucket %d offset %llu size %llu)\n",
			       (unsigned long long)ino, bucket,
			       (unsigned long long)(page * f->geom.page_size),
			       (unsigned long long)m.size);
			f->bad_csum++;
		}
	}
	return 0;
}

static int cmd_fsck(const char *root, const char *meta_path)
{
	struct fsck f = { 0 };
	struct kvb_pages_geom pg;
	char err[1024], path[4096], backend[32];
	uint64_t npages, snap_diff = 0, leaked = 0, missing = 0;
	int lock_fd, clean = 0, problems = 0, ret, have_snapshot = 1;
	uint32_t b;

	lock_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock_fd < 0) {
		fprintf(stderr, "offloadctl: ROOT %s: %s\n", root, strerror(errno));
		return 2;
	}
	if (flock(lock_fd, LOCK_EX | LOCK_NB)) {
		fprintf(stderr, "offloadctl: ROOT %s is in use (mounted?); unmount it first\n",
			root);
		return 2;
	}
	if (!meta_path) {
		snprintf(path, sizeof(path), "%s/%s", root, OFS_DB_NAME);
		meta_path = path;
	}
	ret = meta_open(meta_path, 0, &f.meta, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "offloadctl: %s: %s\n", meta_path, err);
		return 2;
	}
	if (meta_geom_get(f.meta, &f.geom, backend, sizeof(backend))) {
		fprintf(stderr, "offloadctl: %s: the store was never formatted\n", meta_path);
		meta_close(f.meta);
		return 2;
	}
	meta_clean_get(f.meta, &clean);
	printf("store %s: page_size %llu, bucket_size %llu, bucket_count %u, schema %d, %s\n",
	       root, (unsigned long long)f.geom.page_size,
	       (unsigned long long)f.geom.bucket_size, f.geom.bucket_count,
	       META_SCHEMA_VERSION, clean ? "clean" : "not cleanly unmounted");

	/* Bucket files: present, regular, at least bucket_size. */
	for (b = 0; b < f.geom.bucket_count; b++) {
		struct stat st;
		char name[32];

		kvb_bucket_name(b, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", root, name);
		if (stat(path, &st)) {
			printf("%s: missing\n", name);
			problems++;
		} else if ((uint64_t)st.st_size < f.geom.bucket_size) {
			printf("%s: %lld bytes, expected %llu (truncated)\n", name,
			       (long long)st.st_size, (unsigned long long)f.geom.bucket_size);
			problems++;
		}
	}
	pg.page_size = f.geom.page_size;
	pg.bucket_size = f.geom.bucket_size;
	pg.bucket_count = f.geom.bucket_count;
	if (!problems && kvb_pages_init(&f.kvb, root, &pg, 0, err, sizeof(err)) == 0)
		f.have_kvb = 1;

	npages = f.geom.bucket_size / f.geom.page_size;
	f.rebuilt = calloc(f.geom.bucket_count, sizeof(*f.rebuilt));
	for (b = 0; b < f.geom.bucket_count; b++)
		alloc_init(&f.rebuilt[b], npages);
	ret = meta_foreach_mapping(f.meta, fsck_map, &f);
	if (ret) {
		printf("cannot read the mappings: %s\n", meta_errmsg(f.meta));
		problems++;
	}

	/* The snapshot a clean unmount left must equal the rebuild, bit for bit. */
	if (clean) {
		struct alloc snap;
		uint64_t *w = malloc(f.rebuilt[0].nwords * sizeof(uint64_t));

		for (b = 0; b < f.geom.bucket_count && w; b++) {
			uint64_t p;

			if (meta_bitmap_load(f.meta, b, npages, w, f.rebuilt[b].nwords)) {
				have_snapshot = 0;
				break;
			}
			alloc_init(&snap, npages);
			if (alloc_load(&snap, w, f.rebuilt[b].nwords)) {
				have_snapshot = 0;
				alloc_release(&snap);
				break;
			}
			if (!alloc_equal(&snap, &f.rebuilt[b])) {
				snap_diff++;
				for (p = 0; p < npages; p++) {
					int s = alloc_test(&snap, p), r = alloc_test(&f.rebuilt[b], p);

					leaked += s && !r;
					missing += !s && r;
				}
			}
			alloc_release(&snap);
		}
		free(w);
		if (!have_snapshot) {
			printf("clean flag set but no bitmap snapshot\n");
			problems++;
		} else if (snap_diff) {
			printf("bitmap snapshot differs from the mappings in %llu bucket(s): %llu "
			       "leaked page(s), %llu allocated page(s) not marked\n",
			       (unsigned long long)snap_diff, (unsigned long long)leaked,
			       (unsigned long long)missing);
			problems++;
		} else {
			printf("bitmap snapshot: identical to the bitmaps rebuilt from the mappings\n");
		}
	}
	problems += (int)(f.overlaps + f.out_of_range + f.bad_csum + f.io_errors);
	printf("objects %llu, overlaps %llu, out of range %llu, checksum mismatches %llu, "
	       "read errors %llu%s\n",
	       (unsigned long long)f.objects, (unsigned long long)f.overlaps,
	       (unsigned long long)f.out_of_range, (unsigned long long)f.bad_csum,
	       (unsigned long long)f.io_errors, f.have_kvb ? "" : " (checksums not checked)");
	printf("%s\n", problems ? "fsck: PROBLEMS FOUND" : "fsck: clean");

	for (b = 0; b < f.geom.bucket_count; b++)
		alloc_release(&f.rebuilt[b]);
	free(f.rebuilt);
	kvb_release(&f.kvb);
	meta_close(f.meta);
	close(lock_fd);
	return problems ? 1 : 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: offloadctl fsck ROOT [--meta PATH]\n"
		     "       offloadctl --version\n");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		printf("offloadctl 0.1.0 (schema %d)\n", META_SCHEMA_VERSION);
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "fsck")) {
		const char *meta = NULL;

		if (argc == 5 && !strcmp(argv[3], "--meta"))
			meta = argv[4];
		else if (argc != 3) {
			usage(stderr);
			return 2;
		}
		return cmd_fsck(argv[2], meta);
	}
	usage(stderr);
	return 2;
}
