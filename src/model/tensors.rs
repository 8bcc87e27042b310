//! Taking a model's tensors out of a [`TensorStore`] by name, with shape checks: each weight's
//! bytes move (no copy) into the [`Weight`] that uses them.

use std::collections::HashMap;

use crate::gguf::{GgmlType, GgufHeader, TensorInfo, TensorStore};
use crate::ops::Weight;
use crate::quant;

use super::ModelError;

pub(crate) struct Tensors {
    infos: Vec<TensorInfo>,
    data: Vec<Option<Vec<u8>>>,
    by_name: HashMap<String, usize>,
}

impl Tensors {
    pub(crate) fn from_store(store: TensorStore) -> (GgufHeader, Tensors) {
        let (header, data) = store.into_parts();
        let infos = header.tensors.clone();
        let by_name = infos.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        (header, Tensors { infos, data: data.into_iter().map(Some).collect(), by_name })
    }

    /// The first tensor (in file order) that nothing took.
    pub(crate) fn first_unused(&self) -> Option<&str> {
        self.data.iter().position(Option::is_some).map(|i| self.infos[i].name.as_str())
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    fn take(&mut self, name: &str, dims: &[usize]) -> Result<(GgmlType, Vec<u8>), ModelError> {
        let &i = self.by_name.get(name).ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
        let info = &self.infos[i];
        let got: Vec<u64> = info.dims.to_vec();
        // Trailing 1s are the same shape ([640] == [640, 1]).
        let trim = |v: &[u64]| {
            let mut v = v.to_vec();
            while v.len() > 1 && v.last() == Some(&1) {
                v.pop();
            }
            v
        };
        let want: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        if trim(&got) != trim(&want) {
            return Err(ModelError::BadTensorShape { name: name.to_string(), expected: want, got });
        }
        let ty = info.ggml_type;
        let bytes = self.data[i].take().ok_or_else(|| ModelError::MissingTensor(format!("{name} (already used)")))?;
        Ok((ty, bytes))
    }

    /// A 2-D weight `[n_in, n_out]` (ggml order), moved into a [`Weight`].
    pub(crate) fn weight(&mut self, name: &str, n_in: usize, n_out: usize) -> Result<Weight, ModelError> {
        let (ty, bytes) = self.take(name, &[n_in, n_out])?;
        Weight::new(ty, n_in, n_out, bytes).map_err(|e| ModelError::tensor_type(name, ty, e))
    }

    pub(crate) fn weight_opt(&mut self, name: &str, n_in: usize, n_out: usize) -> Result<Option<Weight>, ModelError> {
        if self.has(name) {
            self.weight(name, n_in, n_out).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A 1-D tensor of `len` values (norm weights, biases), as f32.
    pub(crate) fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
        let (ty, bytes) = self.take(name, &[len])?;
        let mut v = vec![0.0f32; len];
        quant::dequantize(ty, &bytes, &mut v).map_err(|e| ModelError::tensor_type(name, ty, e))?;
        // Norm weights, biases and RoPE factors are used as they are: one NaN or infinity
        // makes every logit NaN (and a NaN RoPE factor made the KV cache unequal to its own
        // model's, a misleading error).
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(ModelError::BadTensorData { name: name.to_string(), reason: format!("value {i} is {}", v[i]) });
        }
        Ok(v)
    }

    /// Layer `il`'s optional Q, K and V biases (llama.cpp takes them for every architecture).
    pub(crate) fn qkv_biases(&mut self, il: usize, hp: &super::HParams) -> Result<[Option<Vec<f32>>; 3], ModelError> {
        Ok([
            self.vector_opt(&format!("blk.{il}.attn_q.bias"), hp.n_head * hp.head_dim_k)?,
            self.vector_opt(&format!("blk.{il}.attn_k.bias"), hp.n_head_kv * hp.head_dim_k)?,
            self.vector_opt(&format!("blk.{il}.attn_v.bias"), hp.n_head_kv * hp.head_dim_v)?,
        ])
    }

    pub(crate) fn vector_opt(&mut self, name: &str, len: usize) -> Result<Option<Vec<f32>>, ModelError> {
        if self.has(name) {
            self.vector(name, len).map(Some)
        } else {
            Ok(None)
        }
    }
}
