/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mmlab arm64-peer: lets lib/test_vmalloc.c of Debian's linux-source build
 * as an out-of-tree module against Debian's kernel, which is built without
 * CONFIG_TEST_VMALLOC. The kernel exports __vmalloc_node_noprof() only for
 * that in-tree module (EXPORT_SYMBOL_GPL under CONFIG_TEST_VMALLOC_MODULE),
 * so build-test-vmalloc.sh rewrites the module's three __vmalloc_node() calls
 * into peer_vmalloc_node(), which calls the same kernel function through its
 * address, found with kallsyms_lookup_name() (itself found through a kprobe,
 * since it is not exported either). Nothing else of the module changes.
 */
#include <linux/kprobes.h>

typedef void *(*peer_vmalloc_node_t)(unsigned long size, unsigned long align,
				     gfp_t gfp_mask, int node, const void *caller);
static peer_vmalloc_node_t peer_vmalloc_node_fn;

#define peer_vmalloc_node(size, align, gfp, node, caller) \
	peer_vmalloc_node_fn(size, align, gfp, node, caller)

static int peer_resolve(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	unsigned long (*lookup)(const char *name);

	if (register_kprobe(&kp) < 0)
		return -ENOENT;
	lookup = (void *)kp.addr;
	unregister_kprobe(&kp);
	peer_vmalloc_node_fn = (peer_vmalloc_node_t)lookup("__vmalloc_node_noprof");
	if (!peer_vmalloc_node_fn) {
		pr_err("test_vmalloc (mmlab peer): __vmalloc_node_noprof not found\n");
		return -ENOENT;
	}
	return 0;
}

/*
 * The in-tree module returns -EAGAIN from its init, so that it unloads
 * itself once the tests are done. busybox's insmod then loads it a second
 * time (it retries), which runs every test twice; build.sh makes the init
 * return 0 instead, and /init removes the module with rmmod.
 */
static void __exit peer_exit(void)
{
}
module_exit(peer_exit);
