// SPDX-License-Identifier: GPL-2.0
/*
 * C shims for rroce.ko: static inline functions and macros of the kernel
 * headers that Rust cannot call directly, declared in rroce_glue.h and
 * bound in ffi.rs.  Most are one-line forwards; the longer ones fill C
 * structures full of unions and bitfields (UDP socket config, flow keys
 * for the route lookup, the multicast address of a GID) or walk
 * scatterlists with their macros.  No protocol logic lives here.
 */
#include <crypto/hash.h>
#include <linux/cpumask.h>
#include <linux/crc32.h>
#include <linux/highmem.h>
#include <linux/if_vlan.h>
#include <linux/igmp.h>
#include <linux/inetdevice.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <net/dst_cache.h>
#include <net/inet_dscp.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <linux/hmm.h>
#include <linux/mmu_notifier.h>
#include <linux/skbuff.h>
#include <linux/xarray.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "rroce_glue.h"

struct net_device *rroce_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

void rroce_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void rroce_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

struct net *rroce_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

bool rroce_netif_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

bool rroce_is_vlan_dev(const struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

bool rroce_netif_carrier_ok(const struct net_device *ndev)
{
	return netif_carrier_ok(ndev);
}

unsigned int rroce_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

bool rroce_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

void rroce_mutex_lock(struct mutex *m)
{
	mutex_lock(m);
}

int rroce_mutex_trylock(struct mutex *m)
{
	return mutex_trylock(m);
}

void rroce_might_sleep(void)
{
	might_sleep();
}

void rroce_list_init(struct list_head *l)
{
	INIT_LIST_HEAD(l);
}

bool rroce_list_empty(const struct list_head *l)
{
	return list_empty(l);
}

int rroce_ib_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

int rroce_ib_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

struct ib_udata *rroce_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

struct ib_ucontext *rroce_udata_ucontext(struct ib_udata *udata)
{
	return udata ? container_of(udata, struct uverbs_attr_bundle,
				    driver_udata)->context : NULL;
}

unsigned int rroce_num_possible_cpus(void)
{
	return num_possible_cpus();
}

void rroce_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void *rroce_sk_user_data(struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

/*
 * udp_sock_create() and struct udp_port_cfg (bitfields, unions) are awkward
 * from Rust; this fills the config and forwards.  Port is host order.
 */
int rroce_udp_tunnel_open(struct net *net, bool ipv6, u16 port, void *user_data,
			  int (*rcv)(struct sock *sk, struct sk_buff *skb),
			  struct socket **sockp)
{
	struct udp_tunnel_sock_cfg tcfg = {};
	struct udp_port_cfg cfg = {};
	int err;

	if (ipv6) {
		cfg.family = AF_INET6;
		cfg.ipv6_v6only = 1;
		/* RoCEv2 over IPv6 is sent with UDP checksum 0 (the ICRC
		 * protects the packet): accept it. */
		cfg.use_udp6_rx_checksums = 0;
	} else {
		cfg.family = AF_INET;
	}
	cfg.local_udp_port = htons(port);
	err = udp_sock_create(net, &cfg, sockp);
	if (err)
		return err;
	tcfg.sk_user_data = user_data;
	tcfg.encap_type = 1;
	tcfg.encap_rcv = rcv;
	setup_udp_tunnel_sock(net, *sockp, &tcfg);
	return 0;
}

void rroce_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void rroce_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

unsigned long rroce_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void rroce_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

bool rroce_irqs_disabled(void)
{
	return irqs_disabled();
}

bool rroce_in_interrupt(void)
{
	return in_interrupt();
}

void rroce_xa_init_alloc1(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC1);
}

int rroce_xa_alloc_cyclic(struct xarray *xa, u32 *id, void *entry, u32 min,
			  u32 max, u32 *next, gfp_t gfp)
{
	return xa_alloc_cyclic(xa, id, entry, XA_LIMIT(min, max), next, gfp);
}

/*
 * Join (or leave) the IP multicast group of @mgid (an IPv4-mapped or IPv6
 * multicast address) on @ndev, as a UD QP attaching to it needs: the IP
 * layer only accepts datagrams to groups the interface is a member of.
 */
int rroce_mcast_join(struct net_device *ndev, const u8 *mgid, bool join)
{
	const struct in6_addr *a = (const struct in6_addr *)mgid;
	struct in_device *in_dev;
	int err = 0;

	if (ipv6_addr_v4mapped(a)) {
		rtnl_lock();
		in_dev = __in_dev_get_rtnl(ndev);
		if (!in_dev)
			err = -ENODEV;
		else if (join)
			ip_mc_inc_group(in_dev, a->s6_addr32[3]);
		else
			ip_mc_dec_group(in_dev, a->s6_addr32[3]);
		rtnl_unlock();
		return err;
	}
#if IS_ENABLED(CONFIG_IPV6)
	return join ? ipv6_dev_mc_inc(ndev, a) : ipv6_dev_mc_dec(ndev, a);
#else
	return -EAFNOSUPPORT;
#endif
}

/* Erase @id only if it still holds @entry; true if it did. */
bool rroce_xa_erase_if(struct xarray *xa, u32 id, void *entry)
{
	bool hit;

	xa_lock(xa);
	hit = xa_load(xa, id) == entry;
	if (hit)
		__xa_erase(xa, id);
	xa_unlock(xa);
	return hit;
}

void *rroce_xa_find_present(struct xarray *xa, unsigned long *index)
{
	return xa_find(xa, index, ULONG_MAX, XA_PRESENT);
}

/* Replace @old by @new (both non-NULL) at @id; true if @old was there. */
bool rroce_xa_replace(struct xarray *xa, u32 id, void *old, void *new)
{
	return xa_cmpxchg(xa, id, old, new, GFP_KERNEL) == old;
}

struct net_device *rroce_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

int rroce_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

bool rroce_pskb_may_pull(struct sk_buff *skb, unsigned int len)
{
	return pskb_may_pull(skb, len);
}

void *rroce_skb_frag_address_safe(const skb_frag_t *frag)
{
	return skb_frag_address_safe(frag);
}

u8 *rroce_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

u8 *rroce_skb_tail_pointer(const struct sk_buff *skb)
{
	return skb_tail_pointer(skb);
}

struct skb_shared_info *rroce_skb_shinfo(struct sk_buff *skb)
{
	return skb_shinfo(skb);
}

/*
 * An skb for a packet of @len bytes starting at the IP header, with room
 * for the link-layer header in front; @data gets the (uninitialised)
 * packet bytes.
 */
struct sk_buff *rroce_tx_alloc(struct net_device *ndev, unsigned int len,
			       u8 **data)
{
	unsigned int hr = LL_RESERVED_SPACE(ndev);
	struct sk_buff *skb;

	skb = alloc_skb(hr + len + ndev->needed_tailroom, GFP_ATOMIC);
	if (!skb)
		return NULL;
	skb_reserve(skb, hr);
	*data = skb_put(skb, len);
	skb_reset_network_header(skb);
	return skb;
}

/* A per-QP route cache (per-CPU, revalidated on use by dst_check). */
struct dst_cache *rroce_dst_cache_new(void)
{
	struct dst_cache *c = kzalloc(sizeof(*c), GFP_KERNEL_ACCOUNT);

	if (c && dst_cache_init(c, GFP_KERNEL_ACCOUNT)) {
		kfree(c);
		c = NULL;
	}
	return c;
}

void rroce_dst_cache_free(struct dst_cache *c)
{
	if (c) {
		dst_cache_destroy(c);
		kfree(c);
	}
}

/* Forget cached routes; the caller serialises all users of @c. */
void rroce_dst_cache_reset(struct dst_cache *c)
{
	if (c)
		dst_cache_reset(c);
}

static int rroce_tx_send_bh(struct net_device *ndev, struct sk_buff *skb, bool ipv6,
			    struct dst_cache *cache)
{
	struct net *net = dev_net(ndev);
	int err;

	if (!ipv6) {
		const struct iphdr *iph = ip_hdr(skb);
		struct rtable *rt = NULL;
		__be32 saddr = 0;

		skb_set_transport_header(skb, sizeof(struct iphdr));
		if (cache) {
			rt = dst_cache_get_ip4(cache, &saddr);
			if (rt && saddr != iph->saddr) {
				ip_rt_put(rt);
				rt = NULL;
			}
		}
		if (!rt) {
			struct flowi4 fl = {};

			fl.flowi4_oif = ndev->ifindex;
			fl.flowi4_proto = IPPROTO_UDP;
			fl.flowi4_tos = iph->tos & INET_DSCP_MASK;
			fl.daddr = iph->daddr;
			fl.saddr = iph->saddr;
			rt = ip_route_output_key(net, &fl);
			if (IS_ERR(rt)) {
				kfree_skb(skb);
				return PTR_ERR(rt);
			}
			if (cache)
				dst_cache_set_ip4(cache, &rt->dst, fl.saddr);
		}
		skb_dst_set(skb, &rt->dst);
		skb->protocol = htons(ETH_P_IP);
		memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
		skb->ip_summed = CHECKSUM_NONE;
		err = ip_local_out(net, NULL, skb);
	} else {
		const struct ipv6hdr *ip6h = ipv6_hdr(skb);
		struct dst_entry *dst = NULL;
		struct in6_addr saddr;

		skb_set_transport_header(skb, sizeof(struct ipv6hdr));
		if (cache) {
			dst = dst_cache_get_ip6(cache, &saddr);
			if (dst && !ipv6_addr_equal(&saddr, &ip6h->saddr)) {
				dst_release(dst);
				dst = NULL;
			}
		}
		if (!dst) {
			struct flowi6 fl6 = {};

			fl6.flowi6_oif = ndev->ifindex;
			fl6.flowi6_proto = IPPROTO_UDP;
			fl6.daddr = ip6h->daddr;
			fl6.saddr = ip6h->saddr;
			dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
			if (IS_ERR(dst)) {
				kfree_skb(skb);
				return PTR_ERR(dst);
			}
			if (cache)
				dst_cache_set_ip6(cache, dst, &fl6.saddr);
		}
		skb_dst_set(skb, dst);
		skb->protocol = htons(ETH_P_IPV6);
		memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
		skb->ip_summed = CHECKSUM_NONE;
		err = ip6_local_out(net, NULL, skb);
	}
	return net_xmit_eval(err);
}

/*
 * Route and transmit a complete IP datagram built by the driver (IP and
 * UDP headers included) out of @ndev's namespace, using and filling the
 * route cache @cache (may be NULL).  Consumes @skb.  The per-CPU cache
 * slot is used with bottom halves disabled, whatever the caller did
 * (interrupts must be on).
 */
int rroce_tx_send(struct net_device *ndev, struct sk_buff *skb, bool ipv6,
		  struct dst_cache *cache)
{
	int err;

	local_bh_disable();
	err = rroce_tx_send_bh(ndev, skb, ipv6, cache);
	local_bh_enable();
	return err;
}

/* Whether @addr (4 or 16 bytes, network order) is configured on @ndev. */
bool rroce_ndev_has_addr(struct net_device *ndev, bool ipv6, const u8 *addr)
{
	bool found = false;

	if (ipv6)
		return ipv6_chk_addr(dev_net(ndev), (const struct in6_addr *)addr,
				     ndev, 1);
	rcu_read_lock();
	{
		const struct in_device *in_dev = __in_dev_get_rcu(ndev);
		const struct in_ifaddr *ifa;
		__be32 a;

		memcpy(&a, addr, 4);
		if (in_dev) {
			in_dev_for_each_ifa_rcu(ifa, in_dev) {
				if (ifa->ifa_local == a) {
					found = true;
					break;
				}
			}
		}
	}
	rcu_read_unlock();
	return found;
}

void rroce_timer_setup(struct timer_list *t, void (*fn)(struct timer_list *))
{
	timer_setup(t, fn, 0);
}

/* Arm @t to fire @ns nanoseconds from now (at least one jiffy). */
void rroce_timer_arm(struct timer_list *t, u64 ns)
{
	mod_timer(t, jiffies + nsecs_to_jiffies(ns) + 1);
}

void rroce_timer_shutdown(struct timer_list *t)
{
	timer_shutdown_sync(t);
}

u64 rroce_ktime_ns(void)
{
	return ktime_get_ns();
}

/*
 * The ICRC's CRC-32 through the crypto API: "crc32" is the fastest
 * registered implementation (crc32-pclmul on x86 CPUs with PCLMULQDQ,
 * else crc32-generic).  Its descriptor state is the bare CRC register,
 * which is seeded and read back here as crc32_le() takes and returns it
 * (a transform whose state is anything else is refused).
 */
struct crypto_shash *rroce_crc32_tfm_alloc(void)
{
	struct crypto_shash *tfm = crypto_alloc_shash("crc32", 0, 0);

	if (IS_ERR(tfm))
		return NULL;
	if (crypto_shash_descsize(tfm) != sizeof(u32)) {
		crypto_free_shash(tfm);
		return NULL;
	}
	return tfm;
}

void rroce_crc32_tfm_free(struct crypto_shash *tfm)
{
	crypto_free_shash(tfm);
}

const char *rroce_crc32_tfm_driver(struct crypto_shash *tfm)
{
	return crypto_shash_driver_name(tfm);
}

u32 rroce_crc32_shash(struct crypto_shash *tfm, u32 crc, const u8 *p, unsigned int len)
{
	SHASH_DESC_ON_STACK(desc, tfm);
	u32 *reg = shash_desc_ctx(desc);

	desc->tfm = tfm;
	*reg = crc;
	/* crc32's update cannot fail; the table if one ever did */
	if (crypto_shash_update(desc, p, len))
		return crc32_le(crc, p, len);
	return *reg;
}

/*
 * Which CRC-32 computes the ICRC: "auto" (the faster of the two on this
 * machine, timed at module load), "table" (crc32_le) or "crypto" (the
 * crypto API's crc32).
 */
static char *icrc = "auto";
module_param(icrc, charp, 0444);
MODULE_PARM_DESC(icrc, "ICRC CRC-32: auto (the faster here, timed at load), table (crc32_le) or crypto (crypto API crc32, e.g. crc32-pclmul)");

const char *rroce_param_icrc(void)
{
	return icrc ?: "auto";
}

/* Store up to @n pages of @umem in @pages; returns how many it has. */
unsigned long rroce_umem_pages(struct ib_umem *umem, struct page **pages,
			       unsigned long n)
{
	struct sg_page_iter it;
	unsigned long i = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (i < n)
			pages[i] = sg_page_iter_page(&it);
		i++;
	}
	return i;
}

/*
 * Lower object limits for tests that exhaust them (selftests/rdma/limits.sh):
 * with max_objects=N > 0, devices created afterwards advertise and enforce
 * at most N PDs, CQs, QPs, SRQs, MRs and AHs each (ib_core's own objects
 * included).  0, the default, keeps the built-in limits.
 */
static unsigned int max_objects;
module_param(max_objects, uint, 0444);
MODULE_PARM_DESC(max_objects,
		 "cap on PDs/CQs/QPs/SRQs/MRs/AHs per device, 0 = built-in limits (for tests)");

unsigned int rroce_param_max_objects(void)
{
	return READ_ONCE(max_objects);
}

/*
 * Ring memory one user context may have mapped (its queues' rings), in
 * MiB; creating a queue beyond it fails with ENOMEM.  Each ring is also
 * charged to the creator's memory cgroup.
 */
static unsigned int max_ctx_ring_mb = 512;
module_param(max_ctx_ring_mb, uint, 0644);
MODULE_PARM_DESC(max_ctx_ring_mb, "ring memory per user context in MiB (default 512)");

unsigned int rroce_param_max_ctx_ring_mb(void)
{
	return READ_ONCE(max_ctx_ring_mb);
}

void rroce_vma_set_io_flags(struct vm_area_struct *vma)
{
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
}

void rroce_smp_mb(void)
{
	smp_mb();
}

void rroce_rcu_read_lock(void)
{
	rcu_read_lock();
}

void rroce_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

void rroce_local_bh_disable(void)
{
	local_bh_disable();
}

void rroce_local_bh_enable(void)
{
	local_bh_enable();
}

/*
 * The page of a kernel virtual address of the direct map (what ib_dma_map_*
 * returns under virtual DMA), or NULL if @addr is not one.
 */
struct page *rroce_hmm_pfn_to_page(unsigned long hmm_pfn)
{
	return hmm_pfn_to_page(hmm_pfn);
}

bool rroce_mmu_notifier_range_blockable(const struct mmu_notifier_range *range)
{
	return mmu_notifier_range_blockable(range);
}

void rroce_mmu_interval_set_seq(struct mmu_interval_notifier *mni,
				unsigned long cur_seq)
{
	mmu_interval_set_seq(mni, cur_seq);
}

struct ib_umem_odp *rroce_umem_odp_of(struct mmu_interval_notifier *mni)
{
	return container_of(mni, struct ib_umem_odp, notifier);
}

unsigned long rroce_ib_umem_start(struct ib_umem_odp *odp)
{
	return ib_umem_start(odp);
}

unsigned long rroce_ib_umem_end(struct ib_umem_odp *odp)
{
	return ib_umem_end(odp);
}

struct mutex *rroce_umem_odp_mutex(struct ib_umem_odp *odp)
{
	return &odp->umem_mutex;
}

unsigned long rroce_task_size_max(void)
{
	return TASK_SIZE_MAX;
}

void **rroce_umem_odp_private(struct ib_umem_odp *odp)
{
	return &odp->private;
}

unsigned int rroce_umem_odp_page_shift(struct ib_umem_odp *odp)
{
	return odp->page_shift;
}

unsigned long *rroce_umem_odp_pfns(struct ib_umem_odp *odp)
{
	return odp->pfn_list;
}

struct page *rroce_virt_to_page(u64 addr)
{
	const void *p = (const void *)(uintptr_t)addr;

	if (!virt_addr_valid(p))
		return NULL;
	return virt_to_page(p);
}

/* Copy @len bytes between @buf and @page at @off (within the page). */
void rroce_page_copy(struct page *page, unsigned int off, void *buf,
		     unsigned int len, bool to_page)
{
	u8 *va = kmap_local_page(page);

	if (to_page) {
		memcpy(va + off, buf, len);
		flush_dcache_page(page);
	} else {
		memcpy(buf, va + off, len);
	}
	kunmap_local(va);
}

void rroce_work_init(struct work_struct *w, void (*fn)(struct work_struct *))
{
	INIT_WORK(w, fn);
}

void rroce_work_queue(struct workqueue_struct *wq, struct work_struct *w)
{
	queue_work(wq, w);
}

/*
 * Its own INIT_WORK: lockdep keys work items by their INIT_WORK call site,
 * and one that runs in softirq context must not share a class with those
 * that run in process context.
 */
void rroce_bh_work_init(struct work_struct *w, void (*fn)(struct work_struct *))
{
	INIT_WORK(w, fn);
}

void rroce_bh_work_queue(struct work_struct *w)
{
	queue_work(system_bh_wq, w);
}

void *rroce_kmap_local_page(struct page *page)
{
	return kmap_local_page(page);
}

void rroce_kunmap_local(void *addr)
{
	kunmap_local(addr);
}

u64 __percpu *rroce_alloc_percpu_u64(unsigned int n, gfp_t gfp)
{
	return __alloc_percpu_gfp(n * sizeof(u64), sizeof(u64), gfp);
}

void rroce_this_cpu_add_u64(u64 __percpu *p, u64 n)
{
	this_cpu_add(*p, n);
}

u64 *rroce_per_cpu_ptr_u64(u64 __percpu *p, int cpu)
{
	return per_cpu_ptr(p, cpu);
}

int rroce_next_possible_cpu(int cpu)
{
	return cpumask_next(cpu, cpu_possible_mask);
}

unsigned int rroce_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}
