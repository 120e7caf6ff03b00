/* SPDX-License-Identifier: GPL-2.0 */
#ifndef RROCE_GLUE_H
#define RROCE_GLUE_H

#include <linux/spinlock_types.h>
#include <linux/types.h>

struct ib_device;
struct ib_udata;
struct ib_umem_odp;
struct mutex;
struct mmu_interval_notifier;
struct mmu_notifier_range;
struct net;
struct net_device;
struct sk_buff;
struct sock;
struct socket;

struct net_device *rroce_netdev_notifier_info_to_dev(void *info);
void rroce_dev_hold(struct net_device *ndev);
void rroce_dev_put(struct net_device *ndev);
struct net *rroce_dev_net(const struct net_device *ndev);
bool rroce_netif_running(const struct net_device *ndev);
bool rroce_is_vlan_dev(const struct net_device *ndev);
bool rroce_netif_carrier_ok(const struct net_device *ndev);
unsigned int rroce_netdev_mtu(const struct net_device *ndev);
bool rroce_ib_device_try_get(struct ib_device *dev);
void rroce_mutex_lock(struct mutex *m);
int rroce_mutex_trylock(struct mutex *m);
void rroce_might_sleep(void);
void rroce_list_init(struct list_head *l);
bool rroce_list_empty(const struct list_head *l);
int rroce_ib_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
int rroce_ib_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
struct uverbs_attr_bundle;
struct ib_ucontext;
struct ib_udata *rroce_attrs_udata(struct uverbs_attr_bundle *attrs);
struct ib_ucontext *rroce_udata_ucontext(struct ib_udata *udata);
unsigned int rroce_num_possible_cpus(void);
void rroce_kfree_skb(struct sk_buff *skb);
void *rroce_sk_user_data(struct sock *sk);
int rroce_udp_tunnel_open(struct net *net, bool ipv6, u16 port, void *user_data,
			  int (*rcv)(struct sock *sk, struct sk_buff *skb),
			  struct socket **sockp);


void rroce_spin_lock_bh(spinlock_t *lock);
void rroce_spin_unlock_bh(spinlock_t *lock);
unsigned long rroce_spin_lock_irqsave(spinlock_t *lock);
void rroce_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);
bool rroce_irqs_disabled(void);
bool rroce_in_interrupt(void);

struct xarray;
void rroce_xa_init_alloc1(struct xarray *xa);
int rroce_xa_alloc_cyclic(struct xarray *xa, u32 *id, void *entry, u32 min,
			  u32 max, u32 *next, gfp_t gfp);
int rroce_mcast_join(struct net_device *ndev, const u8 *mgid, bool join);
bool rroce_xa_erase_if(struct xarray *xa, u32 id, void *entry);
void *rroce_xa_find_present(struct xarray *xa, unsigned long *index);
bool rroce_xa_replace(struct xarray *xa, u32 id, void *old, void *new);

struct ib_umem;
struct page;
struct timer_list;
struct work_struct;
struct workqueue_struct;
void rroce_work_init(struct work_struct *w, void (*fn)(struct work_struct *));
void rroce_work_queue(struct workqueue_struct *wq, struct work_struct *w);
void rroce_bh_work_init(struct work_struct *w, void (*fn)(struct work_struct *));
void rroce_bh_work_queue(struct work_struct *w);
struct net_device *rroce_skb_dev(const struct sk_buff *skb);
int rroce_skb_linearize(struct sk_buff *skb);
bool rroce_pskb_may_pull(struct sk_buff *skb, unsigned int len);
void *rroce_skb_frag_address_safe(const skb_frag_t *frag);
u8 *rroce_skb_network_header(const struct sk_buff *skb);
u8 *rroce_skb_tail_pointer(const struct sk_buff *skb);
struct skb_shared_info *rroce_skb_shinfo(struct sk_buff *skb);
struct sk_buff *rroce_tx_alloc(struct net_device *ndev, unsigned int len,
			       u8 **data);
struct dst_cache;
int rroce_tx_send(struct net_device *ndev, struct sk_buff *skb, bool ipv6,
		  struct dst_cache *cache);
struct dst_cache *rroce_dst_cache_new(void);
void rroce_dst_cache_free(struct dst_cache *c);
void rroce_dst_cache_reset(struct dst_cache *c);
bool rroce_ndev_has_addr(struct net_device *ndev, bool ipv6, const u8 *addr);
void rroce_timer_setup(struct timer_list *t, void (*fn)(struct timer_list *));
void rroce_timer_arm(struct timer_list *t, u64 ns);
void rroce_timer_shutdown(struct timer_list *t);
u64 rroce_ktime_ns(void);
struct crypto_shash;
struct crypto_shash *rroce_crc32_tfm_alloc(void);
void rroce_crc32_tfm_free(struct crypto_shash *tfm);
const char *rroce_crc32_tfm_driver(struct crypto_shash *tfm);
u32 rroce_crc32_shash(struct crypto_shash *tfm, u32 crc, const u8 *p, unsigned int len);
const char *rroce_param_icrc(void);
unsigned long rroce_umem_pages(struct ib_umem *umem, struct page **pages,
			       unsigned long n);
struct page *rroce_hmm_pfn_to_page(unsigned long hmm_pfn);
bool rroce_mmu_notifier_range_blockable(const struct mmu_notifier_range *range);
void rroce_mmu_interval_set_seq(struct mmu_interval_notifier *mni,
				unsigned long cur_seq);
struct ib_umem_odp *rroce_umem_odp_of(struct mmu_interval_notifier *mni);
unsigned long rroce_ib_umem_start(struct ib_umem_odp *odp);
unsigned long rroce_ib_umem_end(struct ib_umem_odp *odp);
struct mutex *rroce_umem_odp_mutex(struct ib_umem_odp *odp);
unsigned long rroce_task_size_max(void);
void **rroce_umem_odp_private(struct ib_umem_odp *odp);
unsigned int rroce_umem_odp_page_shift(struct ib_umem_odp *odp);
unsigned long *rroce_umem_odp_pfns(struct ib_umem_odp *odp);
struct page *rroce_virt_to_page(u64 addr);
void rroce_smp_mb(void);
unsigned int rroce_param_max_objects(void);
unsigned int rroce_param_max_ctx_ring_mb(void);
void rroce_vma_set_io_flags(struct vm_area_struct *vma);
void rroce_rcu_read_lock(void);
void rroce_rcu_read_unlock(void);
void rroce_local_bh_disable(void);
void rroce_local_bh_enable(void);
void rroce_page_copy(struct page *page, unsigned int off, void *buf,
		     unsigned int len, bool to_page);
void *rroce_kmap_local_page(struct page *page);
void rroce_kunmap_local(void *addr);
u64 __percpu *rroce_alloc_percpu_u64(unsigned int n, gfp_t gfp);
void rroce_this_cpu_add_u64(u64 __percpu *p, u64 n);
u64 *rroce_per_cpu_ptr_u64(u64 __percpu *p, int cpu);
int rroce_next_possible_cpu(int cpu);
unsigned int rroce_nr_cpu_ids(void);

#endif
