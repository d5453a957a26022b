//! Address classification: which special-purpose range an address is in
//! ([`classify`]), including the IPv6 forms that carry an IPv4 address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why the guard refuses an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenyReason {
    /// 127.0.0.0/8, ::1
    Loopback,
    /// RFC 1918: 10/8, 172.16/12, 192.168/16
    Private,
    /// 100.64.0.0/10 (carrier-grade NAT)
    SharedAddressSpace,
    /// 169.254.0.0/16 (cloud metadata lives here), fe80::/10
    LinkLocal,
    /// fc00::/7
    UniqueLocal,
    /// 224.0.0.0/4, ff00::/8
    Multicast,
    /// 0.0.0.0/8, ::
    Unspecified,
    /// 255.255.255.255
    Broadcast,
    /// 192.0.0.0/24, 198.18.0.0/15, 240.0.0.0/4 and other non-global IPv4 blocks; the
    /// non-global IPv6 blocks of IANA's special-purpose registry (documentation,
    /// discard, 2001::/23 with Teredo, ::/8, SRv6 SIDs, ...)
    Reserved,
    /// The proxy's own listening address.
    OwnListener,
}

impl DenyReason {
    /// A short stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            DenyReason::Loopback => "loopback",
            DenyReason::Private => "private",
            DenyReason::SharedAddressSpace => "shared-address-space",
            DenyReason::LinkLocal => "link-local",
            DenyReason::UniqueLocal => "unique-local",
            DenyReason::Multicast => "multicast",
            DenyReason::Unspecified => "unspecified",
            DenyReason::Broadcast => "broadcast",
            DenyReason::Reserved => "reserved",
            DenyReason::OwnListener => "own-listener",
        }
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The IPv4 address of 32 bits of an IPv6 address, from two segments.
fn v4_of(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))
}

/// The IPv4 addresses an IPv6 address carries, in the forms a host, a relay or a
/// translator would turn into IPv4 traffic to that address:
///
/// | form | prefix | IPv4 address in |
/// |---|---|---|
/// | IPv4-mapped | `::ffff:0:0/96` | bits 96–127 |
/// | IPv4-translated (SIIT, RFC 2765) | `::ffff:0:0:0/96` | bits 96–127 |
/// | IPv4-compatible (deprecated) | `::/96`, but not `::` and `::1` | bits 96–127 |
/// | NAT64 well-known prefix (RFC 6052) | `64:ff9b::/96` | bits 96–127 |
/// | NAT64 local-use (RFC 8215) as a /96 | `64:ff9b:1::/96` | bits 96–127 |
/// | 6to4 (RFC 3056) | `2002::/16` | bits 16–47 |
/// | Teredo (RFC 4380) | `2001::/32` | server: bits 32–63; client: bits 96–127, inverted |
///
/// Returns up to two addresses (Teredo carries two).
fn embedded_v4(ip: Ipv6Addr) -> [Option<Ipv4Addr>; 2] {
    let s = ip.segments();
    let tail = v4_of(s[6], s[7]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => [Some(tail), None],
        // ::a.b.c.d (deprecated compatible form), but not :: and ::1 themselves.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => [None, None],
        [0, 0, 0, 0, 0, 0, _, _] => [Some(tail), None],
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 1, 0, 0, 0, _, _] => [Some(tail), None],
        [0x2002, hi, lo, ..] => [Some(v4_of(hi, lo)), None],
        [0x2001, 0, hi, lo, _, _, _, _] => [Some(v4_of(hi, lo)), Some(v4_of(!s[6], !s[7]))],
        _ => [None, None],
    }
}

/// Which special-purpose range `ip` falls in, if any.
///
/// An IPv6 address that carries an IPv4 address (`embedded_v4`: mapped, translated,
/// compatible, NAT64, 6to4, Teredo) is refused for the reason its IPv4 address would be;
/// then the non-global blocks of IANA's IPv6 special-purpose registry are refused.
pub fn classify(ip: IpAddr) -> Option<DenyReason> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            embedded_v4(v6).into_iter().flatten().find_map(classify_v4).or_else(|| classify_v6(v6))
        }
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<DenyReason> {
    let o = ip.octets();
    Some(match o {
        [127, ..] => DenyReason::Loopback,
        [10, ..] => DenyReason::Private,
        [172, b, ..] if (16..32).contains(&b) => DenyReason::Private,
        [192, 168, ..] => DenyReason::Private,
        [100, b, ..] if (64..128).contains(&b) => DenyReason::SharedAddressSpace,
        [169, 254, ..] => DenyReason::LinkLocal,
        [0, ..] => DenyReason::Unspecified,
        [255, 255, 255, 255] => DenyReason::Broadcast,
        [224..=239, ..] => DenyReason::Multicast,
        [240..=255, ..] => DenyReason::Reserved,
        [192, 0, 0, _] | [198, 18 | 19, ..] => DenyReason::Reserved,
        _ => return None,
    })
}

/// The IPv6 blocks of IANA's special-purpose registry that are not globally reachable
/// (<https://www.iana.org/assignments/iana-ipv6-special-registry>, as of 2025), and the
/// deprecated site-local block.
fn classify_v6(ip: Ipv6Addr) -> Option<DenyReason> {
    let s = ip.segments();
    Some(match s {
        _ if ip == Ipv6Addr::UNSPECIFIED => DenyReason::Unspecified,
        _ if ip == Ipv6Addr::LOCALHOST => DenyReason::Loopback,
        [a, ..] if a & 0xffc0 == 0xfe80 => DenyReason::LinkLocal,
        [a, ..] if a & 0xfe00 == 0xfc00 => DenyReason::UniqueLocal,
        [a, ..] if a & 0xff00 == 0xff00 => DenyReason::Multicast,
        // fec0::/10 (deprecated site-local) behaves like private space.
        [a, ..] if a & 0xffc0 == 0xfec0 => DenyReason::Private,
        // Forms whose IPv4 address ([`embedded_v4`]) is public are dialled as that address:
        // ::ffff:0:0/96, ::ffff:0:0:0/96, ::/96, 64:ff9b::/96 and the /96 form of the
        // local-use NAT64 block 64:ff9b:1::/48 (RFC 8215), whose other layouts are not
        // global. The rest of ::/8 is reserved by the IETF.
        [0, 0, 0, 0, 0, 0 | 0xffff, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _]
        | [0x64, 0xff9b, 0 | 1, 0, 0, 0, _, _] => return None,
        [0x64, 0xff9b, 1, ..] => DenyReason::Reserved,
        [a, ..] if a < 0x100 => DenyReason::Reserved,
        // 100::/64 discard-only (RFC 6666), 100:0:0:1::/64 dummy prefix (RFC 9780).
        [0x100, 0, 0, 0 | 1, ..] => DenyReason::Reserved,
        // 2001:db8::/32 documentation.
        [0x2001, 0xdb8, ..] => DenyReason::Reserved,
        // 2001::/23 IETF protocol assignments (Teredo, benchmarking, ORCHID, ...), except
        // the blocks the registry marks globally reachable.
        [0x2001, b, ..] if b < 0x200 && !ietf_global(s) => DenyReason::Reserved,
        // 3fff::/20 documentation (RFC 9637), 5f00::/16 SRv6 SIDs (RFC 9602).
        [0x3fff, b, ..] if b < 0x1000 => DenyReason::Reserved,
        [0x5f00, ..] => DenyReason::Reserved,
        _ => return None,
    })
}

/// The globally reachable blocks inside 2001::/23: PCP and TURN anycast (2001:1::1,
/// 2001:1::2), DNS-SD SRP anycast (2001:1::3), AMT (2001:3::/32), AS112-v6
/// (2001:4:112::/48), ORCHIDv2 (2001:20::/28) and drone DETs (2001:30::/28).
fn ietf_global(s: [u16; 8]) -> bool {
    matches!(
        s,
        [0x2001, 1, 0, 0, 0, 0, 0, 1..=3]
            | [0x2001, 3, ..]
            | [0x2001, 4, 0x112, ..]
            | [0x2001, 0x20..=0x3f, ..]
    )
}

/// Appends `ip` as its `Display` writes it (`192.0.2.1`, `2001:db8::1`). An IPv4 address
/// is written digit by digit, without the formatter's machinery: proxies write the client's
/// address into headers and records on every request.
///
/// ```
/// use std::net::IpAddr;
/// let mut s = String::from("for=");
/// robotsgate::net::push_ip(&mut s, IpAddr::from([192, 0, 2, 10]));
/// assert_eq!(s, "for=192.0.2.10");
/// ```
pub fn push_ip(out: &mut String, ip: IpAddr) {
    ip_text(ip, |part| out.push_str(part));
}

/// [`push_ip`]'s text, handed to `put` piece by piece (for buffers that are not a
/// `String`, such as the audit log's lines).
pub(crate) fn ip_text(ip: IpAddr, mut put: impl FnMut(&str)) {
    match ip {
        IpAddr::V4(v4) => {
            let mut digits = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    put(".");
                }
                put(digits.format(octet));
            }
        }
        IpAddr::V6(v6) => {
            struct Put<F>(F);
            impl<F: FnMut(&str)> std::fmt::Write for Put<F> {
                fn write_str(&mut self, s: &str) -> std::fmt::Result {
                    (self.0)(s);
                    Ok(())
                }
            }
            let _ = std::fmt::Write::write_fmt(&mut Put(put), format_args!("{v6}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn special_ranges() {
        for (a, want) in [
            ("127.0.0.1", Some(DenyReason::Loopback)),
            ("127.255.255.254", Some(DenyReason::Loopback)),
            ("10.1.2.3", Some(DenyReason::Private)),
            ("172.16.0.1", Some(DenyReason::Private)),
            ("172.31.255.255", Some(DenyReason::Private)),
            ("172.32.0.1", None),
            ("192.168.1.1", Some(DenyReason::Private)),
            ("100.64.0.1", Some(DenyReason::SharedAddressSpace)),
            ("100.127.255.255", Some(DenyReason::SharedAddressSpace)),
            ("100.128.0.1", None),
            ("169.254.169.254", Some(DenyReason::LinkLocal)),
            ("0.0.0.0", Some(DenyReason::Unspecified)),
            ("255.255.255.255", Some(DenyReason::Broadcast)),
            ("224.0.0.1", Some(DenyReason::Multicast)),
            ("93.184.216.34", None),
            ("::1", Some(DenyReason::Loopback)),
            ("::", Some(DenyReason::Unspecified)),
            ("fe80::1", Some(DenyReason::LinkLocal)),
            ("fd00::1", Some(DenyReason::UniqueLocal)),
            ("fc00::1", Some(DenyReason::UniqueLocal)),
            ("ff02::1", Some(DenyReason::Multicast)),
            ("::ffff:127.0.0.1", Some(DenyReason::Loopback)),
            ("::ffff:169.254.169.254", Some(DenyReason::LinkLocal)),
            ("::10.0.0.1", Some(DenyReason::Private)),
            ("64:ff9b::10.0.0.1", Some(DenyReason::Private)),
            ("64:ff9b::7f00:1", Some(DenyReason::Loopback)),
            ("64:ff9b:1::a9fe:a9fe", Some(DenyReason::LinkLocal)),
            ("::ffff:93.184.216.34", None),
            ("2606:2800:220:1:248:1893:25c8:1946", None),
        ] {
            assert_eq!(classify(ip(a)), want, "{a}");
        }
    }

    /// Each IPv6 form that carries an IPv4 address, with internal addresses at the edges
    /// of their blocks and public ones just outside them.
    #[test]
    fn ipv6_forms_of_internal_ipv4_addresses() {
        use DenyReason::*;
        // (IPv4 address, verdict) pairs, each written into every form below.
        let v4s = [
            ("127.0.0.0", Some(Loopback)),
            ("127.255.255.255", Some(Loopback)),
            ("126.255.255.255", None),
            ("128.0.0.0", None),
            ("10.0.0.0", Some(Private)),
            ("10.255.255.255", Some(Private)),
            ("11.0.0.0", None),
            ("9.255.255.255", None),
            ("172.16.0.0", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.15.255.255", None),
            ("192.168.0.0", Some(Private)),
            ("192.168.255.255", Some(Private)),
            ("100.64.0.0", Some(SharedAddressSpace)),
            ("100.127.255.255", Some(SharedAddressSpace)),
            ("169.254.0.0", Some(LinkLocal)),
            ("169.254.169.254", Some(LinkLocal)),
            ("169.254.255.255", Some(LinkLocal)),
            ("169.253.255.255", None),
            ("0.0.0.1", Some(Unspecified)),
            ("224.0.0.0", Some(Multicast)),
            ("255.255.255.255", Some(Broadcast)),
            ("93.184.216.34", None),
        ];
        type Form = fn(u32) -> Ipv6Addr;
        let forms: [(&str, Form); 6] = [
            ("mapped", |v| Ipv6Addr::from((0xffffu128 << 32) | u128::from(v))),
            ("translated", |v| Ipv6Addr::from((0xffffu128 << 48) | u128::from(v))),
            ("nat64", |v| Ipv6Addr::from((0x0064_ff9bu128 << 96) | u128::from(v))),
            ("nat64 local /96", |v| Ipv6Addr::from((0x0064_ff9b_0001u128 << 80) | u128::from(v))),
            ("6to4", |v| Ipv6Addr::from((0x2002u128 << 112) | (u128::from(v) << 80) | 1)),
            // Teredo with a public server (192.0.2.x is reserved, so use 93.184.216.34)
            // and the client address inverted in the last 32 bits.
            ("teredo client", |v| {
                Ipv6Addr::from((0x2001_0000u128 << 96) | (0x5db8_d822u128 << 64) | u128::from(!v))
            }),
        ];
        for (name, form) in forms {
            for (v4, want) in v4s {
                let v4: Ipv4Addr = v4.parse().unwrap();
                let v6 = form(u32::from(v4));
                let got = classify(IpAddr::V6(v6));
                // Teredo is in 2001::/23, which is not globally reachable: refused as
                // reserved when its addresses are public.
                let want = match (name, want) {
                    ("teredo client", None) => Some(Reserved),
                    (_, w) => w,
                };
                assert_eq!(got, want, "{name}: {v6} ({v4})");
            }
        }
        // Teredo's server address (bits 32-63), client public.
        let teredo_server = |v: u32| {
            Ipv6Addr::from((0x2001_0000u128 << 96) | (u128::from(v) << 64) | u128::from(!0x5db8_d822u32))
        };
        assert_eq!(classify(IpAddr::V6(teredo_server(0x7f00_0001))), Some(Loopback));
        assert_eq!(classify(IpAddr::V6(teredo_server(0x0a00_0001))), Some(Private));
        // The forms the issue named.
        for (a, want) in [
            ("2002:7f00:1::", Some(Loopback)),
            ("2002:a9fe:a9fe::", Some(LinkLocal)),
            ("::ffff:0:127.0.0.1", Some(Loopback)),
            ("::ffff:0:169.254.169.254", Some(LinkLocal)),
            ("2002:5db8:d822::1", None),
            ("2001:0:5db8:d822::1", Some(Reserved)),
        ] {
            assert_eq!(classify(ip(a)), want, "{a}");
        }
    }

    /// The non-global blocks of IANA's IPv6 special-purpose registry, at their edges.
    #[test]
    fn ipv6_special_purpose_blocks() {
        use DenyReason::*;
        for (a, want) in [
            ("64:ff9b:1::", Some(Unspecified)),
            ("64:ff9b:1:1::1", Some(Reserved)),
            ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("64:ff9b:2::1", Some(Reserved)),
            ("100::", Some(Reserved)),
            ("100::ffff:ffff:ffff:ffff", Some(Reserved)),
            ("100:0:0:1::1", Some(Reserved)),
            ("100:0:0:2::1", None),
            ("2001:2::1", Some(Reserved)),
            ("2001:10::1", Some(Reserved)),
            ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("2001:200::1", None),
            ("2001:1::1", None),
            ("2001:1::2", None),
            ("2001:1::3", None),
            ("2001:1::4", Some(Reserved)),
            ("2001:3::1", None),
            ("2001:4:112::1", None),
            ("2001:4:113::1", Some(Reserved)),
            ("2001:20::1", None),
            ("2001:3f:ffff::1", None),
            ("2001:db8::", Some(Reserved)),
            ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("2001:db9::1", None),
            ("3fff::", Some(Reserved)),
            ("3fff:fff:ffff::1", Some(Reserved)),
            ("3fff:1000::1", None),
            ("64:ff9b::1:0:1", Some(Reserved)),
            ("3ffe:ffff::1", None),
            ("5f00::1", Some(Reserved)),
            ("5f01::1", None),
            ("fec0::1", Some(Private)),
            ("::2", Some(Unspecified)),
            ("::1:0:0:1", Some(Reserved)),
            ("1::1", Some(Reserved)),
            ("2600::1", None),
        ] {
            assert_eq!(classify(ip(a)), want, "{a}");
        }
    }

    #[test]
    fn push_ip_writes_what_display_writes() {
        for ip in ["0.0.0.0", "255.255.255.255", "10.20.3.4", "::", "2001:db8::1", "::ffff:1.2.3.4"] {
            let ip: IpAddr = ip.parse().unwrap();
            let mut s = String::new();
            push_ip(&mut s, ip);
            assert_eq!(s, ip.to_string());
        }
    }
}
