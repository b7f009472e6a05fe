//! The generator's portable random source: ChaCha8, one stream per tensor, read a word per
//! draw; a row's words are found by seeking (ChaCha is a counter mode).

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Portable random source: ChaCha8 on its own stream per tensor.
pub(super) struct Source(pub(super) ChaCha8Rng);

/// How far ahead [`Source::seek`] reads rather than sets the position: rand_chacha's buffer
/// (four 16-word blocks).
const SEEK_BY_READING: u128 = 64;

impl Source {
    pub(super) fn new(seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Source(rng)
    }

    /// The stream from its word `word` on (ChaCha is a counter mode: any word is reached at
    /// once).
    pub(super) fn at(seed: u64, stream: u64, word: u128) -> Self {
        let mut source = Source::new(seed, stream);
        source.seek(word);
        source
    }

    /// Moves the stream to its word `word`. A word a short way ahead is reached by reading up
    /// to it (the words are in rand_chacha's buffer, or one refill away), anything else by
    /// setting the position, which refills the buffer: an operand's row starts peek at a word
    /// of every row, and with K = 16 a row is ten words long.
    pub(super) fn seek(&mut self, word: u128) {
        let now = self.0.get_word_pos();
        if word >= now && word - now <= SEEK_BY_READING {
            for _ in now..word {
                self.0.next_u32();
            }
        } else {
            self.0.set_word_pos(word);
        }
    }

    pub(super) fn word_pos(&self) -> u128 {
        self.0.get_word_pos()
    }

    pub(super) fn byte(&mut self) -> u8 {
        (self.0.next_u32() >> 24) as u8
    }

    /// `out.len()` draws of [`Source::byte`], each masked with `mask`: the same words, read a
    /// chunk at a time. ChaCha's `fill_bytes` gives whole words in order, little-endian, so a
    /// word's top byte is the fourth of its four.
    ///
    /// Why not `byte` in a loop: a call per byte costs twice what ChaCha's own rounds cost
    /// (measured on the range class's shapes), and a campaign makes tens of gigabytes of
    /// operands on its cores.
    pub(super) fn top_bytes(&mut self, out: &mut [u8], mask: u8) {
        const CHUNK: usize = 256;
        // A K-block's eight bytes cost less one call at a time than a chunk's buffer.
        if out.len() < 32 {
            out.iter_mut().for_each(|byte| *byte = self.byte() & mask);
            return;
        }
        let mut words = [0u8; 4 * CHUNK];
        for part in out.chunks_mut(CHUNK) {
            let words = &mut words[..4 * part.len()];
            self.0.fill_bytes(words);
            for (byte, word) in part.iter_mut().zip(words.chunks_exact(4)) {
                *byte = word[3] & mask;
            }
        }
    }

    /// Uniform in 0..bound (bound small, so the modulo bias is below 2^-24 and irrelevant here).
    pub(super) fn below(&mut self, bound: u32) -> u32 {
        ((u64::from(self.0.next_u32()) * u64::from(bound)) >> 32) as u32
    }

    pub(super) fn chance(&mut self, numerator: u32, denominator: u32) -> bool {
        self.below(denominator) < numerator
    }

    /// Uniform in [0, 1) on the 2^-24 grid, like torch.rand's float32.
    pub(super) fn unit_f32(&mut self) -> f32 {
        (self.0.next_u32() >> 8) as f32 * (1.0 / 16_777_216.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seek a short way ahead (read up to) and one that sets the position give the same words.
    #[test]
    fn a_seek_reads_the_words_setting_the_position_reads() {
        for start in [0u128, 5, 63, 64, 1000] {
            for ahead in [0u128, 1, 15, 16, 63, 64, 65, 200] {
                let mut read = Source::at(9, 2, start);
                read.seek(start + ahead);
                let mut set = Source::new(9, 2);
                set.0.set_word_pos(start + ahead);
                let words = |s: &mut Source| (0..40).map(|_| s.0.next_u32()).collect::<Vec<_>>();
                assert_eq!(words(&mut read), words(&mut set), "{start} + {ahead}");
            }
        }
        // Backwards, too.
        let mut back = Source::at(9, 2, 300);
        back.seek(7);
        assert_eq!(back.word_pos(), 7);
    }

    /// Bytes read a chunk of words at a time are the bytes read a word at a time, and leave
    /// the stream at the same word: short runs, runs across the chunk's and ChaCha's buffer's
    /// edges, from starts inside a buffer.
    #[test]
    fn top_bytes_are_the_bytes_of_one_word_at_a_time() {
        for start in [0u128, 3, 63, 64, 1001] {
            for len in [0usize, 1, 8, 31, 32, 33, 255, 256, 257, 1000, 4099] {
                for mask in [0xff, 0b1011_1011] {
                    let mut chunked = Source::at(5, 1, start);
                    let mut bytes = vec![0u8; len];
                    chunked.top_bytes(&mut bytes, mask);
                    let mut one_by_one = Source::at(5, 1, start);
                    let expected: Vec<u8> = (0..len).map(|_| one_by_one.byte() & mask).collect();
                    assert_eq!(bytes, expected, "start {start}, {len} bytes");
                    assert_eq!(chunked.word_pos(), one_by_one.word_pos());
                }
            }
        }
    }
}
