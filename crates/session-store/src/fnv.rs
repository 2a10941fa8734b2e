//! FNV-1a, 64 bits: the one stable hash of the crate (message digests for prompt-cache
//! checks, the forensic views' definition hash). Stable across builds and platforms, unlike
//! `std`'s hasher, and too small a thing to take a dependency for.

/// The FNV-1a 64 offset basis: the hash of nothing.
pub(crate) const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

const PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash continued from `hash` over `bytes`: `fold(fold(OFFSET, a), b)` is the hash of
/// `a` followed by `b`.
pub(crate) fn fold(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_test_vectors() {
        assert_eq!(fold(OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fold(OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fold(OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(fold(fold(OFFSET, b"foo"), b"bar"), fold(OFFSET, b"foobar"));
    }
}
