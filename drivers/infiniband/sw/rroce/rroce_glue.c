// SPDX-License-Identifier: GPL-2.0
/*
 * C shims for rroce.ko: static inline functions and macros of the kernel
 * headers that Rust cannot call directly.  No logic lives here; every
 * function is a one-line forward, declared in rroce_glue.h and bound by
 * hand in glue.rs.
 */
#include <linux/cpumask.h>
#include <linux/netdevice.h>
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
		cfg.use_udp6_rx_checksums = 1;
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

void rroce_xa_init_alloc1(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC1);
}

int rroce_xa_alloc(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max,
		   gfp_t gfp)
{
	return xa_alloc(xa, id, entry, XA_LIMIT(min, max), gfp);
}
