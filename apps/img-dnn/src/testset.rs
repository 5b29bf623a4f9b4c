//! The test split as `train.py` writes it, read without Python:
//! `b"TLIMG001"`, u32 LE count, u32 LE dim, count×dim f32 LE, count u8 labels.

use std::path::Path;

use taillab_core::app::AppError;

const MAGIC: &[u8; 8] = b"TLIMG001";

/// Images and their labels, row-major.
#[derive(Debug, Clone)]
pub struct TestSet {
    pixels: Vec<f32>,
    labels: Vec<u8>,
    dim: usize,
}

impl TestSet {
    /// Reads and checks a `test.bin`; a wrong file says to re-prepare.
    pub fn load(path: &Path) -> Result<Self, AppError> {
        let bytes = std::fs::read(path).map_err(|e| AppError::io(path, e))?;
        Self::parse(&bytes).map_err(|why| AppError::DataMissing {
            app: "img-dnn".into(),
            why: format!("{} is not a test set: {why}", path.display()),
        })
    }

    /// Parses the bytes of a `test.bin`; the error says what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            return Err("bad header".into());
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as usize;
        let (n, dim) = (u32_at(8), u32_at(12));
        let want = n
            .checked_mul(dim)
            .and_then(|p| p.checked_mul(4))
            .and_then(|p| p.checked_add(16 + n))
            .ok_or("size overflows")?;
        if n == 0 || dim != crate::DIM || bytes.len() != want {
            return Err(format!(
                "header says {n} images of {dim} pixels, file has {} bytes",
                bytes.len()
            ));
        }
        let end = 16 + n * dim * 4;
        let pixels = bytes[16..end]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(TestSet {
            pixels,
            labels: bytes[end..].to_vec(),
            dim,
        })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no images (never, for a parsed file).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Image `i`'s pixels in [0, 1], row-major.
    pub fn image(&self, i: usize) -> &[f32] {
        &self.pixels[i * self.dim..(i + 1) * self.dim]
    }

    /// Image `i`'s class, 0–9.
    pub fn label(&self, i: usize) -> u8 {
        self.labels[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&(crate::DIM as u32).to_le_bytes());
        for i in 0..crate::DIM {
            b.extend_from_slice(&(i as f32).to_le_bytes());
        }
        b.push(7);
        let t = TestSet::parse(&b).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t.label(0), 7);
        assert_eq!(t.image(0)[3], 3.0);
        assert!(TestSet::parse(&b[..b.len() - 1]).is_err());
        assert!(TestSet::parse(b"NOTMAGIC\0\0\0\0\0\0\0\0").is_err());
    }
}
