// SPDX-License-Identifier: GPL-2.0
//! Declarations of the C shims in `rroce_glue.c`.
//!
//! C header: [`rroce_glue.h`](rroce_glue.h)
//!
//! Each function forwards to a static inline function or macro of the kernel
//! headers that bindgen cannot expose; their contracts are those of the
//! wrapped kernel function.

use kernel::bindings;
use kernel::ffi::{c_int, c_uint, c_ulong, c_void};

/// `struct crypto_shash` (`include/crypto/hash.h`, not among the kernel
/// crate's bindings): only ever behind a pointer from
/// `rroce_crc32_tfm_alloc`.
#[repr(C)]
pub(crate) struct CryptoShash {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<*mut u8>,
}

// Only pointers to kernel structures cross this boundary; some of them embed
// members that are empty in this configuration (`netdevice_tracker`,
// `lockdep_map`), which the lint flags although no value is passed.
#[allow(improper_ctypes)]
extern "C" {
    pub(crate) fn rroce_netdev_notifier_info_to_dev(info: *mut c_void)
        -> *mut bindings::net_device;
    pub(crate) fn rroce_dev_hold(ndev: *mut bindings::net_device);
    pub(crate) fn rroce_dev_put(ndev: *mut bindings::net_device);
    pub(crate) fn rroce_dev_net(ndev: *const bindings::net_device) -> *mut bindings::net;
    pub(crate) fn rroce_netif_running(ndev: *const bindings::net_device) -> bool;
    pub(crate) fn rroce_netif_carrier_ok(ndev: *const bindings::net_device) -> bool;
    pub(crate) fn rroce_is_vlan_dev(ndev: *const bindings::net_device) -> bool;
    pub(crate) fn rroce_netdev_mtu(ndev: *const bindings::net_device) -> c_uint;
    pub(crate) fn rroce_ib_device_try_get(dev: *mut bindings::ib_device) -> bool;
    pub(crate) fn rroce_mutex_lock(m: *mut bindings::mutex);
    pub(crate) fn rroce_mutex_trylock(m: *mut bindings::mutex) -> c_int;
    pub(crate) fn rroce_might_sleep();
    pub(crate) fn rroce_list_init(l: *mut bindings::list_head);
    pub(crate) fn rroce_list_empty(l: *const bindings::list_head) -> bool;
    pub(crate) fn rroce_ib_copy_to_udata(
        udata: *mut bindings::ib_udata,
        src: *const c_void,
        len: usize,
    ) -> c_int;
    pub(crate) fn rroce_ib_copy_from_udata(
        dst: *mut c_void,
        udata: *mut bindings::ib_udata,
        len: usize,
    ) -> c_int;
    pub(crate) fn rroce_attrs_udata(
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> *mut bindings::ib_udata;
    pub(crate) fn rroce_udata_ucontext(udata: *mut bindings::ib_udata)
        -> *mut bindings::ib_ucontext;
    pub(crate) fn rroce_spin_lock_bh(lock: *mut bindings::spinlock_t);
    pub(crate) fn rroce_spin_unlock_bh(lock: *mut bindings::spinlock_t);
    pub(crate) fn rroce_spin_lock_irqsave(lock: *mut bindings::spinlock_t) -> kernel::ffi::c_ulong;
    pub(crate) fn rroce_spin_unlock_irqrestore(lock: *mut bindings::spinlock_t, flags: kernel::ffi::c_ulong);
    pub(crate) fn rroce_irqs_disabled() -> bool;
    pub(crate) fn rroce_in_interrupt() -> bool;
    pub(crate) fn rroce_num_possible_cpus() -> c_uint;
    pub(crate) fn rroce_xa_init_alloc1(xa: *mut bindings::xarray);
    pub(crate) fn rroce_xa_alloc_cyclic(
        xa: *mut bindings::xarray,
        id: *mut u32,
        entry: *mut c_void,
        min: u32,
        max: u32,
        next: *mut u32,
        gfp: bindings::gfp_t,
    ) -> c_int;
    pub(crate) fn rroce_xa_erase_if(xa: *mut bindings::xarray, id: u32, entry: *mut c_void) -> bool;
    pub(crate) fn rroce_xa_find_present(xa: *mut bindings::xarray, index: *mut core::ffi::c_ulong) -> *mut c_void;
    pub(crate) fn rroce_xa_replace(
        xa: *mut bindings::xarray,
        id: u32,
        old: *mut c_void,
        new: *mut c_void,
    ) -> bool;
    pub(crate) fn rroce_mcast_join(ndev: *mut bindings::net_device, mgid: *const u8, join: bool) -> c_int;
    pub(crate) fn rroce_kfree_skb(skb: *mut bindings::sk_buff);
    pub(crate) fn rroce_sk_user_data(sk: *mut bindings::sock) -> *mut c_void;
    pub(crate) fn rroce_udp_tunnel_open(
        net: *mut bindings::net,
        ipv6: bool,
        port: u16,
        user_data: *mut c_void,
        rcv: unsafe extern "C" fn(*mut bindings::sock, *mut bindings::sk_buff) -> c_int,
        sockp: *mut *mut bindings::socket,
    ) -> c_int;
    pub(crate) fn rroce_skb_dev(skb: *const bindings::sk_buff) -> *mut bindings::net_device;
    pub(crate) fn rroce_skb_linearize(skb: *mut bindings::sk_buff) -> c_int;
    pub(crate) fn rroce_pskb_may_pull(skb: *mut bindings::sk_buff, len: c_uint) -> bool;
    pub(crate) fn rroce_skb_frag_address_safe(frag: *const bindings::skb_frag_t) -> *mut c_void;
    pub(crate) fn rroce_skb_network_header(skb: *const bindings::sk_buff) -> *mut u8;
    pub(crate) fn rroce_skb_tail_pointer(skb: *const bindings::sk_buff) -> *mut u8;
    pub(crate) fn rroce_skb_shinfo(skb: *mut bindings::sk_buff) -> *mut bindings::skb_shared_info;
    pub(crate) fn rroce_tx_alloc(
        ndev: *mut bindings::net_device,
        len: c_uint,
        data: *mut *mut u8,
    ) -> *mut bindings::sk_buff;
    pub(crate) fn rroce_tx_send(
        ndev: *mut bindings::net_device,
        skb: *mut bindings::sk_buff,
        ipv6: bool,
        cache: *mut bindings::dst_cache,
    ) -> c_int;
    pub(crate) fn rroce_dst_cache_new() -> *mut bindings::dst_cache;
    pub(crate) fn rroce_dst_cache_free(c: *mut bindings::dst_cache);
    pub(crate) fn rroce_dst_cache_reset(c: *mut bindings::dst_cache);
    pub(crate) fn rroce_ndev_has_addr(ndev: *mut bindings::net_device, ipv6: bool, addr: *const u8)
        -> bool;
    pub(crate) fn rroce_timer_setup(
        t: *mut bindings::timer_list,
        f: unsafe extern "C" fn(*mut bindings::timer_list),
    );
    pub(crate) fn rroce_work_init(
        w: *mut bindings::work_struct,
        f: unsafe extern "C" fn(*mut bindings::work_struct),
    );
    pub(crate) fn rroce_work_queue(wq: *mut bindings::workqueue_struct, w: *mut bindings::work_struct);
    pub(crate) fn rroce_bh_work_init(
        w: *mut bindings::work_struct,
        f: unsafe extern "C" fn(*mut bindings::work_struct),
    );
    pub(crate) fn rroce_bh_work_queue(w: *mut bindings::work_struct);
    pub(crate) fn rroce_timer_arm(t: *mut bindings::timer_list, ns: u64);
    pub(crate) fn rroce_timer_shutdown(t: *mut bindings::timer_list);
    pub(crate) fn rroce_ktime_ns() -> u64;
    pub(crate) fn rroce_crc32_tfm_alloc() -> *mut CryptoShash;
    pub(crate) fn rroce_crc32_tfm_free(tfm: *mut CryptoShash);
    pub(crate) fn rroce_crc32_tfm_driver(tfm: *mut CryptoShash) -> *const kernel::ffi::c_char;
    pub(crate) fn rroce_crc32_shash(tfm: *mut CryptoShash, crc: u32, p: *const u8, len: c_uint) -> u32;
    pub(crate) fn rroce_param_icrc() -> *const kernel::ffi::c_char;
    pub(crate) fn rroce_umem_pages(
        umem: *mut bindings::ib_umem,
        pages: *mut *mut bindings::page,
        n: core::ffi::c_ulong,
    ) -> core::ffi::c_ulong;
    pub(crate) fn rroce_page_copy(page: *mut bindings::page, off: c_uint, buf: *mut c_void, len: c_uint, to_page: bool);
    pub(crate) fn rroce_smp_mb();
    pub(crate) fn rroce_param_max_objects() -> c_uint;
    pub(crate) fn rroce_param_max_ctx_ring_mb() -> c_uint;
    pub(crate) fn rroce_vma_set_io_flags(vma: *mut bindings::vm_area_struct);
    pub(crate) fn rroce_rcu_read_lock();
    pub(crate) fn rroce_rcu_read_unlock();
    pub(crate) fn rroce_local_bh_disable();
    pub(crate) fn rroce_local_bh_enable();
    pub(crate) fn rroce_virt_to_page(addr: u64) -> *mut bindings::page;
    pub(crate) fn rroce_kmap_local_page(page: *mut bindings::page) -> *mut c_void;
    pub(crate) fn rroce_kunmap_local(addr: *mut c_void);
    pub(crate) fn rroce_alloc_percpu_u64(n: c_uint, gfp: bindings::gfp_t) -> *mut u64;
    pub(crate) fn rroce_this_cpu_add_u64(p: *mut u64, n: u64);
    pub(crate) fn rroce_per_cpu_ptr_u64(p: *mut u64, cpu: c_int) -> *mut u64;
    pub(crate) fn rroce_next_possible_cpu(cpu: c_int) -> c_int;
    pub(crate) fn rroce_nr_cpu_ids() -> c_uint;
    pub(crate) fn rroce_hmm_pfn_to_page(hmm_pfn: c_ulong) -> *mut bindings::page;
    pub(crate) fn rroce_mmu_notifier_range_blockable(range: *const bindings::mmu_notifier_range) -> bool;
    pub(crate) fn rroce_mmu_interval_set_seq(mni: *mut bindings::mmu_interval_notifier, cur_seq: c_ulong);
    pub(crate) fn rroce_umem_odp_of(mni: *mut bindings::mmu_interval_notifier) -> *mut bindings::ib_umem_odp;
    pub(crate) fn rroce_ib_umem_start(odp: *mut bindings::ib_umem_odp) -> c_ulong;
    pub(crate) fn rroce_ib_umem_end(odp: *mut bindings::ib_umem_odp) -> c_ulong;
    pub(crate) fn rroce_umem_odp_mutex(odp: *mut bindings::ib_umem_odp) -> *mut bindings::mutex;
    pub(crate) fn rroce_task_size_max() -> usize;
    pub(crate) fn rroce_umem_odp_private(odp: *mut bindings::ib_umem_odp) -> *mut *mut c_void;
    pub(crate) fn rroce_umem_odp_page_shift(odp: *mut bindings::ib_umem_odp) -> c_uint;
    pub(crate) fn rroce_umem_odp_pfns(odp: *mut bindings::ib_umem_odp) -> *mut c_ulong;
}

// ib_core's on-demand paging API (`rdma/ib_umem_odp.h`, exported by
// ib_core; the Rust bindings do not include that header).
#[allow(improper_ctypes)]
extern "C" {
    pub(crate) fn ib_umem_odp_get(
        device: *mut bindings::ib_device,
        addr: c_ulong,
        size: usize,
        access: c_int,
        ops: *const bindings::mmu_interval_notifier_ops,
    ) -> *mut bindings::ib_umem_odp;
    pub(crate) fn ib_umem_odp_release(umem_odp: *mut bindings::ib_umem_odp);
    pub(crate) fn ib_umem_odp_alloc_implicit(device: *mut bindings::ib_device, access: c_int) -> *mut bindings::ib_umem_odp;
    pub(crate) fn ib_umem_odp_alloc_child(
        root_umem: *mut bindings::ib_umem_odp,
        addr: c_ulong,
        size: usize,
        ops: *const bindings::mmu_interval_notifier_ops,
    ) -> *mut bindings::ib_umem_odp;
    pub(crate) fn ib_umem_odp_map_dma_and_lock(
        umem_odp: *mut bindings::ib_umem_odp,
        start_offset: u64,
        bcnt: u64,
        access_mask: u64,
        fault: bool,
    ) -> c_int;
    pub(crate) fn ib_umem_odp_unmap_dma_pages(umem_odp: *mut bindings::ib_umem_odp, start_offset: u64, bound: u64);
}

/// `ODP_READ_ALLOWED_BIT` of `rdma/ib_umem_odp.h`.
pub(crate) const ODP_READ_ALLOWED_BIT: u64 = 1 << 0;
/// `ODP_WRITE_ALLOWED_BIT` of `rdma/ib_umem_odp.h`.
pub(crate) const ODP_WRITE_ALLOWED_BIT: u64 = 1 << 1;
/// `HMM_PFN_VALID` of `linux/hmm.h`.
pub(crate) const HMM_PFN_VALID: c_ulong = 1 << (c_ulong::BITS - 1);
/// `HMM_PFN_WRITE` of `linux/hmm.h`.
pub(crate) const HMM_PFN_WRITE: c_ulong = 1 << (c_ulong::BITS - 2);
