//! Byte helpers shared by the matchers: substring search and a byte-order sort of many
//! literals that share long prefixes.

/// Leftmost occurrence of `needle` in `hay` (an empty needle is at 0).
#[inline]
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    match needle.len() {
        0 => Some(0),
        1 => memchr::memchr(needle[0], hay),
        _ if needle.len() > hay.len() => None,
        _ => memchr::memmem::find(hay, needle),
    }
}

/// Indices of `items` in byte order. A most-significant-first sort on 7-byte chunks
/// that first skips the prefix every item of a run shares: robots.txt files repeat long
/// prefixes (`/$27889f02-.../`), which would make plain comparisons slow.
pub(crate) fn sorted_by_bytes(items: &[&[u8]]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..items.len() as u32).collect();
    let mut keyed = Vec::with_capacity(items.len());
    sort_run(items, &mut order, 0, &mut keyed);
    order
}

/// Up to 7 bytes of `b` from `at`, zero-padded, then how many bytes were left (0xFF for
/// more than 7): ordered like the suffixes themselves, and equal only for equal
/// suffixes unless both go on past the 7 bytes.
#[inline]
fn chunk_key(b: &[u8], at: usize) -> u64 {
    let rest = &b[at.min(b.len())..];
    let mut k = [0u8; 8];
    let n = rest.len().min(7);
    k[..n].copy_from_slice(&rest[..n]);
    k[7] = if rest.len() <= 7 { rest.len() as u8 } else { 0xFF };
    u64::from_be_bytes(k)
}

fn sort_run(items: &[&[u8]], order: &mut [u32], depth: usize, keyed: &mut Vec<(u64, u32)>) {
    if order.len() <= 1 {
        return;
    }
    let first = &items[order[0] as usize][depth.min(items[order[0] as usize].len())..];
    let mut lcp = first.len();
    for &i in &order[1..] {
        let other = &items[i as usize][depth.min(items[i as usize].len())..];
        lcp = lcp.min(first.iter().zip(other).take_while(|(a, b)| a == b).count());
        if lcp == 0 {
            break;
        }
    }
    let depth = depth + lcp;
    keyed.clear();
    keyed.extend(order.iter().map(|&i| (chunk_key(items[i as usize], depth), i)));
    keyed.sort_unstable_by_key(|e| e.0);
    let mut runs = Vec::new();
    let mut k = 0;
    while k < keyed.len() {
        let mut e = k + 1;
        while e < keyed.len() && keyed[e].0 == keyed[k].0 {
            e += 1;
        }
        if e - k > 1 && keyed[k].0 & 0xFF == 0xFF {
            runs.push((k, e));
        }
        order[k..e].iter_mut().zip(&keyed[k..e]).for_each(|(o, kv)| *o = kv.1);
        k = e;
    }
    for (k, e) in runs {
        sort_run(items, &mut order[k..e], depth + 7, keyed);
    }
}
