/*
 * anon-touch: allocate and free anonymous pages in a known pattern, for
 * capturing the page allocator's kmem tracepoints on a real kernel
 * (scripts/capture-kernel-trace.sh) and replaying them with
 * `mmlab trace kernel`.
 *
 * Each round maps PAGES pages with MADV_NOHUGEPAGE (so every fault takes
 * one order-0 page), touches them in order (one page allocation each),
 * unmaps every other page first and then the rest (frees in two passes,
 * through the batched folio free path), and repeats.
 *
 * usage: anon-touch [PAGES [ROUNDS]]   (defaults 384 and 3)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long pages = argc > 1 ? atol(argv[1]) : 384;
	long rounds = argc > 2 ? atol(argv[2]) : 3;
	long psz = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || rounds <= 0) {
		fprintf(stderr, "usage: anon-touch [PAGES [ROUNDS]]\n");
		return 2;
	}
	for (long r = 0; r < rounds; r++) {
		char *p = mmap(NULL, pages * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		madvise(p, pages * psz, MADV_NOHUGEPAGE);
		for (long i = 0; i < pages; i++)
			p[i * psz] = (char)i;
		for (long i = 0; i < pages; i += 2)
			munmap(p + i * psz, psz);
		for (long i = 1; i < pages; i += 2)
			munmap(p + i * psz, psz);
	}
	return 0;
}
