//! Pod IP allocation: each node owns a slice of 10.0.0.0/8; IPs stay unique and are not reused early.

use std::collections::{HashSet, VecDeque};
use std::net::Ipv4Addr;

/// Node addressing plan for `count` nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    prefix_len: u32,
}

impl Plan {
    /// Splits 10.0.0.0/8 evenly between `count` nodes (at most /24 each).
    pub fn new(count: usize) -> Self {
        let bits = usize::BITS - count.max(1).saturating_sub(1).leading_zeros();
        Self {
            prefix_len: (8 + bits).min(24),
        }
    }

    /// The node's IP (InternalIP): 172.16.0.0/12 + index + 2.
    pub fn host_ip(self, index: usize) -> Ipv4Addr {
        Ipv4Addr::from(
            u32::from(Ipv4Addr::new(172, 16, 0, 2))
                .wrapping_add(u32::try_from(index).unwrap_or(0) & 0x000f_ffff),
        )
    }

    fn base(self, index: usize) -> u32 {
        let slots = 1u32 << (self.prefix_len - 8);
        let slot = u32::try_from(index).unwrap_or(0) % slots;
        u32::from(Ipv4Addr::new(10, 0, 0, 0)) + (slot << (32 - self.prefix_len))
    }

    /// The node's `spec.podCIDR`.
    pub fn pod_cidr(self, index: usize) -> String {
        format!("{}/{}", Ipv4Addr::from(self.base(index)), self.prefix_len)
    }

    /// A fresh IP pool for the node.
    pub fn pool(self, index: usize) -> Pool {
        Pool {
            base: self.base(index),
            size: 1u32 << (32 - self.prefix_len),
            next: 2,
            free: VecDeque::new(),
            used: HashSet::new(),
        }
    }
}

/// One node's pod IPs; released addresses are reused only once the fresh range is exhausted, oldest first.
#[derive(Clone, Debug)]
pub struct Pool {
    base: u32,
    size: u32,
    next: u32,
    free: VecDeque<u32>,
    used: HashSet<u32>,
}

impl Pool {
    /// Allocates an unused IP (`None` if the range is exhausted).
    pub fn allocate(&mut self) -> Option<Ipv4Addr> {
        while self.next < self.size - 1 {
            let off = self.next;
            self.next += 1;
            if self.used.insert(off) {
                return Some(Ipv4Addr::from(self.base + off));
            }
        }
        while let Some(off) = self.free.pop_front() {
            if self.used.insert(off) {
                return Some(Ipv4Addr::from(self.base + off));
            }
        }
        None
    }

    /// Claims a specific IP (a pod that already has one); false if it is outside the range or taken.
    pub fn reserve(&mut self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        let Some(off) = ip
            .checked_sub(self.base)
            .filter(|o| *o >= 2 && *o < self.size - 1)
        else {
            return false;
        };
        self.used.insert(off)
    }

    /// Returns an IP to the pool.
    pub fn release(&mut self, ip: Ipv4Addr) {
        if let Some(off) = u32::from(ip).checked_sub(self.base).filter(|o| *o < self.size)
            && self.used.remove(&off)
        {
            self.free.push_back(off);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        assert_eq!(Plan::new(1).pod_cidr(0), "10.0.0.0/8");
        assert_eq!(Plan::new(3).pod_cidr(2), "10.128.0.0/10");
        assert_eq!(Plan::new(256).pod_cidr(255), "10.255.0.0/16");
        assert_eq!(Plan::new(100_000).pod_cidr(1), "10.0.1.0/24");
        assert_eq!(Plan::new(3).host_ip(1), Ipv4Addr::new(172, 16, 0, 3));
    }

    #[test]
    fn unique_and_not_reused_early() {
        let mut p = Plan::new(65536).pool(0); // /24: 253 usable
        let a = p.allocate().unwrap_or(Ipv4Addr::UNSPECIFIED);
        assert_eq!(a, Ipv4Addr::new(10, 0, 0, 2));
        p.release(a);
        let b = p.allocate().unwrap_or(Ipv4Addr::UNSPECIFIED);
        assert_ne!(a, b, "fresh addresses first");
        assert!(p.reserve(Ipv4Addr::new(10, 0, 0, 9)));
        assert!(!p.reserve(Ipv4Addr::new(10, 0, 0, 9)));
        let mut n = 2;
        while let Some(ip) = p.allocate() {
            assert_ne!(ip, Ipv4Addr::new(10, 0, 0, 9));
            n += 1;
        }
        assert_eq!(n, 253);
    }
}
