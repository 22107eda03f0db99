// crc32c.hpp - CRC-32C (Castagnoli), the checksum safetensors files written by headgrad carry for
// each tensor (framework/io/safetensors.hpp).
//
// CRC-32C is the CRC of iSCSI, ext4 metadata and Btrfs (RFC 3720, appendix B.4: polynomial
// 0x1EDC6F41, reflected 0x82F63B78, initial value and final XOR 0xFFFFFFFF; the check value of
// the ASCII string "123456789" is 0xE3069283). It detects every error burst of up to 32 bits and
// all odd numbers of flipped bits, which covers the bit rot and torn sectors a stored checkpoint
// meets; it is not a defence against deliberate tampering. Computed 8 bytes at a time with
// slicing-by-8 tables (Kounavis and Berry, "A Systematic Approach to Building High Performance
// Software-Based CRC Generators", ISCC 2005), about 1 byte per cycle without special
// instructions.
#pragma once
#include <cstddef>
#include <cstdint>

namespace headgrad::io {

// Continues `crc` (the value returned for the bytes before; 0 to start) over n more bytes, so
// crc32c(b, n) == crc32c(b + k, n - k, crc32c(b, k)).
std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc = 0);

} // namespace headgrad::io
