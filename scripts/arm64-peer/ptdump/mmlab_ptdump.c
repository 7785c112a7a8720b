// SPDX-License-Identifier: GPL-2.0
/*
 * mmlab arm64-peer: the kernel's translation tables after boot, for a kernel
 * built with CONFIG_PTDUMP (for DEBUG_WX) but without CONFIG_PTDUMP_DEBUGFS,
 * as Debian's arm64 kernel is.
 *
 * At load time the module walks swapper_pg_dir (init_mm.pgd) from the start
 * of the linear map (_PAGE_OFFSET(vabits_actual)) to the top of the address
 * space and records, into buffers taken from the linear map (so that the
 * module's own allocations add no translation tables):
 *
 *  - the page-table dump in the format of arm64's ptdump (the text of
 *    /sys/kernel/debug/kernel_page_tables): a line per run of entries of one
 *    level with equal attributes, address markers between the regions;
 *  - the number of distinct table pages per level, in all and per region
 *    (the region of the marker section holding the first non-empty entry of
 *    the table, so that a table shared by two regions counts once).
 *
 * If the kernel's own ptdump_walk() can be reached (through kallsyms; it is
 * built but unused without the debugfs file), its text is the one exported,
 * and the module's walk is compared with it line for line; pgtable_pages
 * says which text it is and whether they agree.
 *
 * Files: /sys/kernel/debug/mmlab_ptdump/{kernel_page_tables,pgtable_pages}.
 *
 * The walk holds init_mm's mmap lock for writing, as the kernel's walk does.
 * The module's own text and data are in the modules region when it runs;
 * they are part of what it sees.
 */
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/kprobes.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/xarray.h>

#include <asm/fixmap.h>
#include <asm/memory.h>
#include <asm/pgtable.h>
#include <asm/ptdump.h>

#define TEXT_SIZE	SZ_2M
#define MAX_MARKERS	16

/* Levels as the dump numbers them. */
enum { L_PGD, L_P4D, L_PUD, L_PMD, L_PTE, NR_LEVELS };
static const char *const level_name[NR_LEVELS] = { "PGD", "P4D", "PUD", "PMD", "PTE" };
static const char *const level_key[NR_LEVELS] = { "pgd", "p4d", "pud", "pmd", "pte" };

/*
 * The attribute columns of the dump, in the order the kernel prints them:
 * when (prot & mask) == val the first string, else the second (if any).
 */
struct attr_col {
	u64 mask, val;
	const char *on, *off;
};

static const struct attr_col cols[] = {
	{ PTE_VALID, PTE_VALID, " ", "F" },
	{ PTE_USER, PTE_USER, "USR", "   " },
	{ PTE_RDONLY, PTE_RDONLY, "ro", "RW" },
	{ PTE_PXN, PTE_PXN, "NX", "x " },
	{ PTE_SHARED, PTE_SHARED, "SHD", "   " },
	{ PTE_AF, PTE_AF, "AF", "  " },
	{ PTE_NG, PTE_NG, "NG", "  " },
	{ PTE_CONT, PTE_CONT, "CON", "   " },
	{ PMD_TYPE_MASK, PMD_TYPE_SECT, "BLK", "   " },
	{ PTE_UXN, PTE_UXN, "UXN", "   " },
	{ PTE_GP, PTE_GP, "GP", "  " },
	{ PTE_ATTRINDX_MASK, PTE_ATTRINDX(MT_DEVICE_nGnRnE), "DEVICE/nGnRnE", NULL },
	{ PTE_ATTRINDX_MASK, PTE_ATTRINDX(MT_DEVICE_nGnRE), "DEVICE/nGnRE", NULL },
	{ PTE_ATTRINDX_MASK, PTE_ATTRINDX(MT_NORMAL_NC), "MEM/NORMAL-NC", NULL },
	{ PTE_ATTRINDX_MASK, PTE_ATTRINDX(MT_NORMAL), "MEM/NORMAL", NULL },
	{ PTE_ATTRINDX_MASK, PTE_ATTRINDX(MT_NORMAL_TAGGED), "MEM/NORMAL-TAGGED", NULL },
};

static u64 prot_mask;

struct walk {
	struct seq_file *out;
	const struct addr_marker *marker;	/* the section being printed */
	int level;				/* of the current run; -1 before the first */
	u64 prot;
	unsigned long start;
	/* table pages */
	struct xarray seen;
	unsigned long tables[NR_LEVELS];
	unsigned long region_tables[MAX_MARKERS][NR_LEVELS];
	unsigned long shared;
	int err;
};

static struct addr_marker markers[MAX_MARKERS];
static int nr_markers;
static unsigned long walk_start;

static void add_marker(unsigned long start, const char *name)
{
	if (!WARN_ON(nr_markers >= MAX_MARKERS - 1)) {
		markers[nr_markers].start_address = start;
		markers[nr_markers].name = (char *)name;
		nr_markers++;
	}
}

/* The address markers of arm64's dump, with the same values. */
static void init_markers(void)
{
	unsigned long page_offset = _PAGE_OFFSET(vabits_actual);

	nr_markers = 0;
	add_marker(PAGE_OFFSET, "Linear Mapping start");
	add_marker(PAGE_END, "Linear Mapping end");
#if defined(CONFIG_KASAN_GENERIC) || defined(CONFIG_KASAN_SW_TAGS)
	add_marker(KASAN_SHADOW_START, "Kasan shadow start");
	add_marker(KASAN_SHADOW_END, "Kasan shadow end");
#endif
	add_marker(MODULES_VADDR, "Modules start");
	add_marker(MODULES_END, "Modules end");
	add_marker(VMALLOC_START, "vmalloc() area");
	add_marker(VMALLOC_END, "vmalloc() end");
	add_marker((unsigned long)virt_to_page((void *)page_offset), "vmemmap start");
	add_marker(VMEMMAP_END, "vmemmap end");
	add_marker(PCI_IO_START, "PCI I/O start");
	add_marker(PCI_IO_END, "PCI I/O end");
	add_marker(FIXADDR_TOT_START, "Fixmap start");
	add_marker(FIXADDR_TOP, "Fixmap end");
	/* The terminator: no section starts after it. */
	markers[nr_markers].start_address = -1UL;
	markers[nr_markers].name = NULL;
	walk_start = page_offset;
}

/* The section (index into markers[]) an address is printed under. */
static int section_of(unsigned long addr)
{
	int i, s = 0;

	for (i = 0; i < nr_markers; i++)
		if (markers[i].start_address <= addr)
			s = i;
	return s;
}

/* A level folded at run time prints as the pgd. */
static int printed_level(int level)
{
	if (level == L_P4D && !pgtable_l5_enabled())
		return L_PGD;
	if (level == L_PUD && !pgtable_l4_enabled())
		return L_PGD;
	return level;
}

static void print_run(struct walk *w, unsigned long end)
{
	static const char units[] = "KMGTPE";
	unsigned long size = (end - w->start) >> 10;
	int u = 0, i;

	while (!(size & 1023) && units[u + 1]) {
		size >>= 10;
		u++;
	}
	seq_printf(w->out, "0x%016lx-0x%016lx   %9lu%c %s", w->start, end, size, units[u],
		   level_name[w->level]);
	if (w->prot)
		for (i = 0; i < ARRAY_SIZE(cols); i++) {
			const char *s = (w->prot & cols[i].mask) == cols[i].val ? cols[i].on : cols[i].off;

			if (s)
				seq_printf(w->out, " %s", s);
		}
	seq_puts(w->out, "\n");
}

static void next_section(struct walk *w)
{
	w->marker++;
	seq_printf(w->out, "---[ %s ]---\n", w->marker->name);
}

/*
 * One entry (or hole, val 0) at addr: extend the current run, or print it
 * and start another. level -1 ends the dump.
 */
static void note(struct walk *w, unsigned long addr, int level, u64 val)
{
	u64 prot = 0;

	if (level >= 0) {
		level = printed_level(level);
		prot = val & prot_mask;
	}
	if (w->level == -1) {
		w->level = level;
		w->prot = prot;
		w->start = addr;
		seq_printf(w->out, "---[ %s ]---\n", w->marker->name);
	} else if (prot != w->prot || level != w->level || addr >= w->marker[1].start_address) {
		print_run(w, addr);
		if (addr >= w->marker[1].start_address)
			next_section(w);
		w->start = addr;
		w->prot = prot;
		w->level = level;
	}
	if (addr >= w->marker[1].start_address)
		next_section(w);
}

/*
 * Count the table page at pa, of level `level`, which maps [base, base +
 * span): once, in the region of its first non-empty entry.
 */
static void count_table(struct walk *w, int level, phys_addr_t pa, unsigned long base,
			unsigned long span)
{
	const u64 *e = __va(pa);
	unsigned long step = span / PTRS_PER_PTE, addr = base;
	int i, r;

	r = xa_insert(&w->seen, PHYS_PFN(pa), xa_mk_value(level), GFP_KERNEL);
	if (r == -EBUSY) {
		w->shared++;
		return;
	}
	if (r) {
		w->err = r;
		return;
	}
	for (i = 0; i < PTRS_PER_PTE; i++)
		if (READ_ONCE(e[i]) && base + i * step >= walk_start) {
			addr = base + i * step;
			break;
		}
	if (addr < walk_start)
		addr = walk_start;
	w->tables[level]++;
	w->region_tables[section_of(addr)][level]++;
}

static void walk_ptes(struct walk *w, pmd_t *pmdp, unsigned long addr, unsigned long end)
{
	pte_t *ptep = pte_offset_kernel(pmdp, addr);

	for (;;) {
		note(w, addr, L_PTE, pte_val(ptep_get(ptep)));
		if (addr >= end - PAGE_SIZE)
			break;
		addr += PAGE_SIZE;
		ptep++;
	}
}

static void walk_pmds(struct walk *w, pud_t *pudp, unsigned long addr, unsigned long end)
{
	pmd_t *pmdp = pmd_offset(pudp, addr);
	unsigned long next;

	do {
		pmd_t v = pmdp_get(pmdp);

		next = pmd_addr_end(addr, end);
		if (pmd_none(v)) {
			note(w, addr, L_PMD, 0);
		} else if (pmd_leaf(v)) {
			note(w, addr, L_PMD, pmd_val(v));
		} else if (pmd_present(v)) {
			count_table(w, L_PTE, pmd_page_paddr(v), addr & PMD_MASK, PMD_SIZE);
			walk_ptes(w, pmdp, addr, next);
		}
	} while (pmdp++, addr = next, addr != end);
}

static void walk_puds(struct walk *w, p4d_t *p4dp, unsigned long addr, unsigned long end)
{
	pud_t *pudp = pud_offset(p4dp, addr);
	unsigned long next;

	do {
		pud_t v = pudp_get(pudp);

		next = pud_addr_end(addr, end);
		if (pud_none(v)) {
			note(w, addr, L_PUD, 0);
		} else if (pud_leaf(v)) {
			note(w, addr, L_PUD, pud_val(v));
		} else if (pud_present(v)) {
			count_table(w, L_PMD, pud_page_paddr(v), addr & PUD_MASK, PUD_SIZE);
			walk_pmds(w, pudp, addr, next);
		}
	} while (pudp++, addr = next, addr != end);
}

static void walk_p4ds(struct walk *w, pgd_t *pgdp, unsigned long addr, unsigned long end)
{
	p4d_t *p4dp = p4d_offset(pgdp, addr);
	unsigned long next;

	do {
		p4d_t v = p4dp_get(p4dp);

		next = p4d_addr_end(addr, end);
		/* A bad entry is a hole to the walk (the kernel's clears it). */
		if (p4d_none(v) || p4d_bad(v)) {
			note(w, addr, L_P4D, 0);
			continue;
		}
		if (pgtable_l4_enabled())
			count_table(w, L_PUD, p4d_page_paddr(v), addr & P4D_MASK, P4D_SIZE);
		walk_puds(w, p4dp, addr, next);
	} while (p4dp++, addr = next, addr != end);
}

static void walk_pgds(struct walk *w, pgd_t *pgdp, unsigned long addr, unsigned long end)
{
	unsigned long next;

	do {
		pgd_t v = pgdp_get(pgdp);

		next = pgd_addr_end(addr, end);
		if (pgd_none(v) || pgd_bad(v)) {
			note(w, addr, L_PGD, 0);
			continue;
		}
		if (pgtable_l5_enabled())
			count_table(w, L_P4D, pgd_page_paddr(v), addr & PGDIR_MASK, PGDIR_SIZE);
		walk_p4ds(w, pgdp, addr, next);
	} while (pgdp++, addr = next, addr != end);
}

/* The kernel symbols the module needs but that are not exported. */
static struct mm_struct *init_mm_p;
static void (*ptdump_walk_fn)(struct seq_file *s, struct ptdump_info *info);

static int resolve(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	unsigned long (*lookup)(const char *name);

	if (register_kprobe(&kp) < 0)
		return -ENOENT;
	lookup = (void *)kp.addr;
	unregister_kprobe(&kp);
	init_mm_p = (struct mm_struct *)lookup("init_mm");
	ptdump_walk_fn = (void *)lookup("ptdump_walk");
	return init_mm_p ? 0 : -ENOENT;
}

/* A seq_file writing into a fixed buffer from the linear map. */
static int text_init(struct seq_file *m)
{
	memset(m, 0, sizeof(*m));
	m->buf = alloc_pages_exact(TEXT_SIZE, GFP_KERNEL | __GFP_NOWARN);
	m->size = TEXT_SIZE;
	return m->buf ? 0 : -ENOMEM;
}

static void text_free(struct seq_file *m)
{
	if (m->buf)
		free_pages_exact(m->buf, TEXT_SIZE);
	m->buf = NULL;
}

static struct seq_file own_text, kernel_text, counts_text;
static struct seq_file *exported_text;
static struct dentry *dir;

/* Line number (from 1) of the first difference of a and b, 0 if none. */
static unsigned long first_difference(const struct seq_file *a, const struct seq_file *b)
{
	unsigned long i, line = 1, n = min(a->count, b->count);

	for (i = 0; i < n; i++) {
		if (a->buf[i] != b->buf[i])
			return line;
		if (a->buf[i] == '\n')
			line++;
	}
	return a->count == b->count ? 0 : line;
}

static unsigned long lines(const struct seq_file *m)
{
	unsigned long i, n = 0;

	for (i = 0; i < m->count; i++)
		n += m->buf[i] == '\n';
	return n;
}

static void print_counts(struct seq_file *c, const char *what, const unsigned long *t)
{
	unsigned long total = 0;
	int l;

	seq_printf(c, "%s:", what);
	for (l = 0; l < NR_LEVELS; l++) {
		seq_printf(c, " %s %lu", level_key[l], t[l]);
		total += t[l];
	}
	seq_printf(c, " total %lu\n", total);
}

static int run(void)
{
	struct walk *w;
	int i, r;

	for (i = 0; i < ARRAY_SIZE(cols); i++)
		prot_mask |= cols[i].mask;
	init_markers();
	r = text_init(&own_text) ?: text_init(&counts_text);
	if (r)
		return r;
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return -ENOMEM;
	xa_init(&w->seen);
	w->out = &own_text;
	w->marker = markers;
	w->level = -1;

	mmap_write_lock(init_mm_p);
	/* The root's entries map (1 << root_shift) bytes each from walk_start. */
	count_table(w, L_PGD, __pa(init_mm_p->pgd), walk_start,
		    (pgtable_l5_enabled() ? PGDIR_SIZE : P4D_SIZE) * PTRS_PER_PTE);
	walk_pgds(w, pgd_offset_pgd(init_mm_p->pgd, walk_start), walk_start, 0);
	mmap_write_unlock(init_mm_p);
	/* The run up to the end of the address space (which wraps to 0). */
	note(w, 0, -1, 0);

	seq_puts(&counts_text, "# translation-table pages reachable from swapper_pg_dir (init_mm.pgd)\n");
	seq_printf(&counts_text, "va_bits: %lu\n", (unsigned long)vabits_actual);
	seq_printf(&counts_text, "levels: %d\n",
		   pgtable_l5_enabled() ? 5 : pgtable_l4_enabled() ? 4 : 3);
	seq_printf(&counts_text, "walk: 0x%016lx-0x%016lx\n", walk_start, 0UL);
	print_counts(&counts_text, "tables", w->tables);
	for (i = 0; i < nr_markers; i++) {
		unsigned long sum = 0;
		int l;

		for (l = 0; l < NR_LEVELS; l++)
			sum += w->region_tables[i][l];
		if (sum) {
			seq_printf(&counts_text, "region %s", markers[i].name);
			print_counts(&counts_text, "", w->region_tables[i]);
		}
	}
	seq_printf(&counts_text, "reached twice: %lu\n", w->shared);
	if (w->err)
		seq_printf(&counts_text, "error: %d\n", w->err);
	xa_destroy(&w->seen);
	kfree(w);

	exported_text = &own_text;
	if (ptdump_walk_fn && !text_init(&kernel_text)) {
		struct ptdump_info info = {
			.mm = init_mm_p, .markers = markers, .base_addr = walk_start,
		};
		unsigned long d;

		ptdump_walk_fn(&kernel_text, &info);
		exported_text = &kernel_text;
		d = first_difference(&kernel_text, &own_text);
		if (d)
			seq_printf(&counts_text, "text: the kernel's ptdump_walk(); this module's walk differs from line %lu\n", d);
		else
			seq_printf(&counts_text, "text: the kernel's ptdump_walk(), the same as this module's walk (%lu lines)\n",
				   lines(&own_text));
	} else {
		seq_printf(&counts_text, "text: this module's walk (%lu lines; ptdump_walk() not found)\n",
			   lines(&own_text));
	}
	if (seq_has_overflowed(exported_text) || seq_has_overflowed(&own_text))
		seq_puts(&counts_text, "error: the dump is longer than the buffer\n");
	return 0;
}

static ssize_t read_text(struct file *f, char __user *ubuf, size_t len, loff_t *pos)
{
	const struct seq_file *m = file_inode(f)->i_private;

	return simple_read_from_buffer(ubuf, len, pos, m->buf, min(m->count, m->size));
}

static const struct file_operations text_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = read_text,
	.llseek = default_llseek,
};

static int __init mmlab_ptdump_init(void)
{
	int r = resolve();

	if (r) {
		pr_err("mmlab_ptdump: init_mm not found\n");
		return r;
	}
	r = run();
	if (r) {
		text_free(&own_text);
		text_free(&counts_text);
		text_free(&kernel_text);
		return r;
	}
	dir = debugfs_create_dir("mmlab_ptdump", NULL);
	debugfs_create_file("kernel_page_tables", 0400, dir, exported_text, &text_fops);
	debugfs_create_file("pgtable_pages", 0400, dir, &counts_text, &text_fops);
	return 0;
}

static void __exit mmlab_ptdump_exit(void)
{
	debugfs_remove_recursive(dir);
	text_free(&own_text);
	text_free(&counts_text);
	text_free(&kernel_text);
}

module_init(mmlab_ptdump_init);
module_exit(mmlab_ptdump_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("mmlab arm64-peer: kernel page-table dump and table pages per level");
