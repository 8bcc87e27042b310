//! A loaded model: the header plus one owned byte buffer per tensor.

use std::collections::HashMap;

use super::types::{GgufHeader, TensorInfo};

/// The tensors of a GGUF file, each in its own buffer holding exactly its stored bytes (in the
/// file's block format; dequantization is `quant/`'s job).
#[derive(Debug)]
pub struct TensorStore {
    pub header: GgufHeader,
    /// `data[i]` belongs to `header.tensors[i]`.
    data: Vec<Vec<u8>>,
    by_name: HashMap<String, usize>,
}

impl TensorStore {
    /// Pairs a header with its tensors' bytes (`data[i]` for `header.tensors[i]`, each exactly
    /// `n_bytes()` long; the loader guarantees both).
    pub(crate) fn new(header: GgufHeader, data: Vec<Vec<u8>>) -> TensorStore {
        debug_assert_eq!(header.tensors.len(), data.len());
        let by_name = header.tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        TensorStore { header, data, by_name }
    }

    /// A tensor's descriptor and bytes, by name.
    pub fn tensor(&self, name: &str) -> Option<(&TensorInfo, &[u8])> {
        self.by_name.get(name).and_then(|&i| self.get(i))
    }

    /// A tensor by its position in the header's tensor index.
    pub fn get(&self, index: usize) -> Option<(&TensorInfo, &[u8])> {
        Some((self.header.tensors.get(index)?, self.data.get(index)?.as_slice()))
    }

    /// All tensors, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (&TensorInfo, &[u8])> {
        self.header.tensors.iter().zip(self.data.iter().map(Vec::as_slice))
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Bytes of tensor data held (the weights term of the memory ledger).
    pub fn bytes_total(&self) -> u64 {
        self.data.iter().map(|d| d.len() as u64).sum()
    }

    /// Gives up the buffers without copying them (`data[i]` belongs to `header.tensors[i]`), so
    /// a model can take ownership of its weights.
    pub fn into_parts(self) -> (GgufHeader, Vec<Vec<u8>>) {
        (self.header, self.data)
    }
}
