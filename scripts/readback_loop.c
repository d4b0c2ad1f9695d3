/*
 * readback_loop: the life of KV blocks read back right after their put, one
 * block at a time, timed per phase: for each of N files of SIZE bytes in
 * DIR, open(O_CREAT|O_WRONLY|O_TRUNC), write, close; open, read, close
 * (get after put); the same again (get again); stat; and, once every file
 * has been through those, unlink each (files just read, as a client drops
 * blocks it used).  Prints one line per phase: ops/s.  scripts/bench-readback
 * runs it on offloadfs, passthrough_ll and the filesystem itself.
 *
 *     readback_loop DIR N SIZE [interleaved|synced]
 *
 * interleaved: each file's unlink follows its stat at once (the loop of one
 * file after the other), instead of a pass of unlinks at the end; synced:
 * sync(2) before that pass, as scripts/bench syncs before each cell (a
 * file the filesystem has not written back yet costs it less to unlink).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { PUT, GET1, GET2, STAT, UNLINK, NPHASE };
static const char *names[NPHASE] = { "put", "get after put", "get again", "stat after get",
				     "delete" };
static double spent[NPHASE];

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "readback_loop: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void get(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		die("open", path);
	n = read(fd, buf, size);
	if (n != (ssize_t)size)
		die("read", path);
	close(fd);
}

int main(int argc, char **argv)
{
	char path[4096], *buf, *in;
	size_t size;
	int n, i, k, inter, synced;
	double t;

	if (argc < 4) {
		fprintf(stderr, "usage: readback_loop DIR N SIZE [interleaved|synced]\n");
		return 2;
	}
	n = atoi(argv[2]);
	size = (size_t)atol(argv[3]);
	inter = argc > 4 && !strcmp(argv[4], "interleaved");
	synced = argc > 4 && !strcmp(argv[4], "synced");
	buf = malloc(size);
	in = malloc(size);
	if (!buf || !in)
		return 1;
	for (k = 0; k < (int)size; k++)
		buf[k] = (char)(k * 7 + 3);
	for (i = 0; i < n; i++) {
		struct stat st;
		int fd;

		snprintf(path, sizeof(path), "%s/k%06d", argv[1], i);
		buf[0] = (char)i;
		t = now();
		fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, size) != (ssize_t)size || close(fd))
			die("put", path);
		spent[PUT] += now() - t;
		t = now();
		get(path, in, size);
		spent[GET1] += now() - t;
		if (memcmp(in, buf, size)) {
			fprintf(stderr, "readback_loop: %s reads back other bytes\n", path);
			return 1;
		}
		t = now();
		get(path, in, size);
		spent[GET2] += now() - t;
		t = now();
		if (stat(path, &st))
			die("stat", path);
		spent[STAT] += now() - t;
		if (inter) {
			t = now();
			if (unlink(path))
				die("unlink", path);
			spent[UNLINK] += now() - t;
		}
	}
	if (synced)
		sync();
	for (i = 0; !inter && i < n; i++) {
		snprintf(path, sizeof(path), "%s/k%06d", argv[1], i);
		t = now();
		if (unlink(path))
			die("unlink", path);
		spent[UNLINK] += now() - t;
	}
	for (k = 0; k < NPHASE; k++)
		printf("%s\t%.0f\n", names[k], spent[k] > 0 ? n / spent[k] : 0.0);
	return 0;
}
