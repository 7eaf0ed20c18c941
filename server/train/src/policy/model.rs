//! The policy network: a small decoder-only transformer over the environment's
//! tokenizer (GPT-2 layout: learned token and position embeddings, pre-norm blocks of
//! causal multi-head self-attention and a GELU MLP, a final norm and a linear head).
//! With `model.positions = "rotary"` there is no position table: each block turns its
//! queries and keys by their positions instead ([`super::rotary`]).
//!
//! Two ways to run it:
//! - [`PolicyModel::forward`]: a whole right-padded batch `[N, S]` at once, causal
//!   attention (padding sits after every real token, so no real query sees it). The
//!   trainer's path.
//! - [`PolicyModel::prefill`] then [`PolicyModel::decode_step`]: generation with a
//!   key/value cache. Contexts are left-padded to a common length so every row appends
//!   at the same column; each row's positions start at 0 at its first real token and
//!   padded keys are masked out. A step costs one token's work per row instead of a
//!   pass over the whole context, so generating `L` tokens is linear in `L`, not
//!   quadratic.
//! - [`PolicyModel::extend`]: more tokens for the rows of an existing cache (an
//!   agent's next turn: the tool's observation and the next prompt), left-padded to a
//!   common length after the cached columns; each new query sees the row's cached keys
//!   and the new keys up to its own. A row's keys keep their positions, so extending a
//!   cache gives the logits a prefill of the whole context would (within `f32`
//!   rounding). [`KvCache::select`] keeps the rows still running.
//!
//! Padding can sit anywhere in a row (left of a prefill, left of an extension, after a
//! row stopped generating while others went on): every padded column is masked for
//! every query, and positions count only real tokens.

use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::{gelu, softmax};

use super::rotary;
use crate::config::{ModelConfig, PositionKind};

/// Added to the scores of masked keys (finite, so a fully masked row stays a number).
const MASKED: f32 = -1.0e9;

/// One pre-norm transformer block.
#[derive(Module, Debug)]
pub struct Block {
    pub(crate) norm_attention: LayerNorm,
    pub(crate) qkv: Linear,
    pub(crate) out: Linear,
    pub(crate) norm_mlp: LayerNorm,
    pub(crate) up: Linear,
    pub(crate) down: Linear,
    pub(crate) heads: usize,
}

/// The cached keys and values of one block, `[N, H, T, d_head]` each.
#[derive(Debug, Clone)]
pub struct LayerCache {
    keys: Tensor<4>,
    values: Tensor<4>,
}

/// A generation cache: per-block keys/values, the key padding mask and the next
/// position of each row.
#[derive(Debug, Clone)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    /// Per row, one flag per cached column: true on padding (a masked key).
    padded: Vec<Vec<bool>>,
    /// Next position id per row (the real tokens it holds).
    next_position: Vec<i64>,
}

impl KvCache {
    /// Columns (real and padded) each row holds.
    pub fn columns(&self) -> usize {
        self.padded.first().map_or(0, Vec::len)
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        self.padded.len()
    }

    /// `[N, 1, 1, T]`, true on padded keys.
    fn padded_tensor(&self, device: &Device) -> Tensor<4, Bool> {
        let (n, t) = (self.rows(), self.columns());
        let flat: Vec<bool> = self.padded.iter().flatten().copied().collect();
        Tensor::<4, Bool>::from_data(TensorData::new(flat, [n, 1, 1, t]), device)
    }

    /// The rows `rows` (indices into this cache, in the order wanted) as a new cache.
    #[must_use]
    pub fn select(&self, rows: &[usize], device: &Device) -> Self {
        let indices: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
        let indices = Tensor::<1, Int>::from_data(TensorData::new(indices, [rows.len()]), device);
        Self {
            layers: self
                .layers
                .iter()
                .map(|layer| LayerCache {
                    keys: layer.keys.clone().select(0, indices.clone()),
                    values: layer.values.clone().select(0, indices.clone()),
                })
                .collect(),
            padded: rows.iter().map(|&r| self.padded[r].clone()).collect(),
            next_position: rows.iter().map(|&r| self.next_position[r]).collect(),
        }
    }
}

impl Block {
    fn new(config: &ModelConfig, device: &Device) -> Self {
        let d = config.width;
        Self {
            norm_attention: LayerNormConfig::new(d).init(device),
            qkv: LinearConfig::new(d, 3 * d).init(device),
            out: LinearConfig::new(d, d).init(device),
            norm_mlp: LayerNormConfig::new(d).init(device),
            up: LinearConfig::new(d, 4 * d).init(device),
            down: LinearConfig::new(4 * d, d).init(device),
            heads: config.heads,
        }
    }

    /// Queries, keys and values `[N, H, T, d_head]` of `x: [N, T, d]`, the queries and
    /// keys turned by `turn` when the model has rotary positions.
    fn project(&self, x: Tensor<3>, turn: Option<&Turn>) -> (Tensor<4>, Tensor<4>, Tensor<4>) {
        let [n, t, d] = x.dims();
        let h = self.heads;
        let qkv = self.qkv.forward(self.norm_attention.forward(x));
        let split = |i: usize| {
            qkv.clone()
                .slice(s![.., .., i * d..(i + 1) * d])
                .reshape([n, t, h, d / h])
                .swap_dims(1, 2)
        };
        let (q, k) = match turn {
            Some(turn) => (turn.apply(split(0)), turn.apply(split(1))),
            None => (split(0), split(1)),
        };
        (q, k, split(2))
    }

    /// Attention of `q` over `k`, `v` with `mask` (true = hidden), back to `[N, T, d]`.
    fn attend(&self, q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, mask: Tensor<4, Bool>) -> Tensor<3> {
        let [n, h, t, dh] = q.dims();
        let scores = q.matmul(k.swap_dims(2, 3)).div_scalar((dh as f64).sqrt());
        let [_, _, _, keys] = scores.dims();
        let scores = scores.mask_fill(mask.expand([n, h, t, keys]), MASKED);
        let context = softmax(scores, 3).matmul(v);
        self.out
            .forward(context.swap_dims(1, 2).reshape([n, t, h * dh]))
    }

    fn mlp(&self, x: Tensor<3>) -> Tensor<3> {
        self.down
            .forward(gelu(self.up.forward(self.norm_mlp.forward(x))))
    }

    /// A block over a whole sequence with `mask`; returns the output and this block's
    /// keys and values.
    fn forward(
        &self,
        x: Tensor<3>,
        mask: Tensor<4, Bool>,
        turn: Option<&Turn>,
    ) -> (Tensor<3>, LayerCache) {
        let (q, k, v) = self.project(x.clone(), turn);
        let x = x + self.attend(q, k.clone(), v.clone(), mask);
        let x = x.clone() + self.mlp(x);
        (x, LayerCache { keys: k, values: v })
    }

    /// A block over new tokens `x: [N, L, d]` per row, appending their keys and values
    /// to `cache`; `mask` (`[N, 1, 1 or L, keys]`, true = hidden) covers the cached and
    /// the new keys.
    fn step(
        &self,
        x: Tensor<3>,
        cache: &mut LayerCache,
        mask: Tensor<4, Bool>,
        turn: Option<&Turn>,
    ) -> Tensor<3> {
        let (q, k, v) = self.project(x.clone(), turn);
        cache.keys = Tensor::cat(vec![cache.keys.clone(), k], 2);
        cache.values = Tensor::cat(vec![cache.values.clone(), v], 2);
        let x = x + self.attend(q, cache.keys.clone(), cache.values.clone(), mask);
        x.clone() + self.mlp(x)
    }
}

/// The rotary turn of a batch's queries and keys: `cos` and `sin` of each token's
/// angles, `[N, 1, T, d_head]`, each pair's angle in both halves' columns.
struct Turn {
    cos: Tensor<4>,
    sin: Tensor<4>,
}

impl Turn {
    /// The turn for tokens at `positions` (`[N, T]` row-major; padded columns may hold
    /// any position, their keys are masked) for heads `head_dim` wide.
    fn new(positions: &[i32], n: usize, t: usize, head_dim: usize, device: &Device) -> Self {
        let pairs = head_dim / 2;
        let mut cos = Vec::with_capacity(n * t * head_dim);
        let mut sin = Vec::with_capacity(n * t * head_dim);
        for &p in positions {
            for column in 0..head_dim {
                let (s, c) = rotary::angle(p as usize, column % pairs, pairs).sin_cos();
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        let tensor =
            |v: Vec<f32>| Tensor::<4>::from_data(TensorData::new(v, [n, 1, t, head_dim]), device);
        Self {
            cos: tensor(cos),
            sin: tensor(sin),
        }
    }

    /// `x cos + rotate_half(x) sin` for `x: [N, H, T, d_head]`, where
    /// `rotate_half([a | b]) = [-b | a]`.
    fn apply(&self, x: Tensor<4>) -> Tensor<4> {
        let [n, h, t, dh] = x.dims();
        let half = dh / 2;
        let low = x.clone().slice(s![.., .., .., 0..half]);
        let high = x.clone().slice(s![.., .., .., half..dh]);
        let rotated = Tensor::cat(vec![high.neg(), low], 3);
        x * self.cos.clone().expand([n, h, t, dh])
            + rotated * self.sin.clone().expand([n, h, t, dh])
    }
}

/// The policy transformer.
#[derive(Module, Debug)]
pub struct PolicyModel {
    pub(crate) tokens: Embedding,
    /// The learned position table; `None` with rotary positions.
    pub(crate) positions: Option<Embedding>,
    pub(crate) blocks: Vec<Block>,
    pub(crate) norm: LayerNorm,
    pub(crate) head: Linear,
    context: usize,
}

impl PolicyModel {
    /// A freshly initialised model for `vocab` tokens on `device` (seed the device
    /// first: burn draws the initial weights lazily from its device RNG).
    pub fn new(config: &ModelConfig, vocab: usize, device: &Device) -> Self {
        Self {
            tokens: EmbeddingConfig::new(vocab, config.width)
                .with_initializer(burn::nn::Initializer::Normal {
                    mean: 0.0,
                    std: 0.02,
                })
                .init(device),
            positions: (config.positions == PositionKind::Learned).then(|| {
                EmbeddingConfig::new(config.context, config.width)
                    .with_initializer(burn::nn::Initializer::Normal {
                        mean: 0.0,
                        std: 0.02,
                    })
                    .init(device)
            }),
            blocks: (0..config.layers)
                .map(|_| Block::new(config, device))
                .collect(),
            norm: LayerNormConfig::new(config.width).init(device),
            head: LinearConfig::new(config.width, vocab).init(device),
            context: config.context,
        }
    }

    /// Positions the model knows (`model.context`).
    pub(crate) fn context(&self) -> usize {
        self.context
    }

    /// Attention heads per block.
    pub(crate) fn heads(&self) -> usize {
        self.blocks.first().map_or(1, |b| b.heads)
    }

    /// The token embeddings plus, with a learned table, the position embeddings of
    /// `positions` (`[N, T]` row-major); with rotary positions, the turn the blocks
    /// apply instead.
    fn embed(&self, ids: Tensor<2, Int>, positions: Vec<i32>) -> (Tensor<3>, Option<Turn>) {
        let [n, t] = ids.dims();
        let device = ids.device();
        let tokens = self.tokens.forward(ids);
        match &self.positions {
            Some(table) => {
                let positions =
                    Tensor::<2, Int>::from_data(TensorData::new(positions, [n, t]), &device);
                (tokens + table.forward(positions), None)
            }
            None => {
                let [_, _, d] = tokens.dims();
                let turn = Turn::new(&positions, n, t, d / self.heads(), &device);
                (tokens, Some(turn))
            }
        }
    }

    /// Logits `[N, S, V]` of a right-padded batch `ids: [N, S]` (position `j` predicts
    /// token `j + 1`).
    pub fn forward(&self, ids: Tensor<2, Int>) -> Tensor<3> {
        let [n, s] = ids.dims();
        let device = ids.device();
        let positions: Vec<i32> = (0..n).flat_map(|_| 0..s as i32).collect();
        let causal = Tensor::<2, Bool>::tril_mask([s, s], 0, &device).reshape([1, 1, s, s]);
        let (mut x, turn) = self.embed(ids, positions);
        for block in &self.blocks {
            x = block.forward(x, causal.clone(), turn.as_ref()).0;
        }
        self.head.forward(self.norm.forward(x))
    }

    /// Runs left-padded contexts through the model and returns the cache and the
    /// logits `[N, V]` at each row's last position. `contexts` must be non-empty and
    /// each at most the model's `context` positions long.
    pub fn prefill(&self, contexts: &[&[u32]], device: &Device) -> (KvCache, Tensor<2>) {
        let n = contexts.len();
        let width = contexts.iter().map(|c| c.len()).max().unwrap_or(1).max(1);
        let mut ids = vec![0i32; n * width];
        let mut positions = vec![0i32; n * width];
        let mut padded_rows = vec![vec![false; width]; n];
        let mut next_position = Vec::with_capacity(n);
        for (row, context) in contexts.iter().enumerate() {
            let pad = width - context.len();
            for j in 0..width {
                let at = row * width + j;
                if j < pad {
                    padded_rows[row][j] = true;
                } else {
                    ids[at] = context[j - pad] as i32;
                    positions[at] = (j - pad) as i32;
                }
            }
            next_position.push(context.len() as i64);
        }
        let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [n, width]), device);
        let flat: Vec<bool> = padded_rows.iter().flatten().copied().collect();
        let padded = Tensor::<4, Bool>::from_data(TensorData::new(flat, [n, 1, 1, width]), device);
        let causal = Tensor::<2, Bool>::tril_mask([width, width], 0, device)
            .reshape([1, 1, width, width])
            .expand([n, 1, width, width]);
        let mask = causal.bool_or(padded.clone().expand([n, 1, width, width]));
        let (mut x, turn) = self.embed(ids, positions);
        let mut layers = Vec::with_capacity(self.blocks.len());
        for block in &self.blocks {
            let (y, cache) = block.forward(x, mask.clone(), turn.as_ref());
            x = y;
            layers.push(cache);
        }
        let last = x.slice(s![.., width - 1..width, ..]);
        let logits = self.head.forward(self.norm.forward(last));
        let vocab = logits.dims()[2];
        let logits = logits.reshape([n, vocab]);
        (
            KvCache {
                layers,
                padded: padded_rows,
                next_position,
            },
            logits,
        )
    }

    /// The position id of a row's next token (clamped to the model's positions).
    fn position(&self, next: i64) -> i32 {
        next.min(self.context as i64 - 1) as i32
    }

    /// Feeds one token per row and returns the next logits `[N, V]`. A row whose
    /// `live` flag is false feeds a padding column (masked, no position used): a row
    /// that has finished while others generate on.
    pub fn decode_step(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        live: &[bool],
        device: &Device,
    ) -> Tensor<2> {
        let n = tokens.len();
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let positions: Vec<i32> = cache
            .next_position
            .iter()
            .map(|&p| self.position(p))
            .collect();
        for ((next, padded), &live) in cache
            .next_position
            .iter_mut()
            .zip(&mut cache.padded)
            .zip(live)
        {
            *next += i64::from(live);
            padded.push(!live);
        }
        let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [n, 1]), device);
        let mask = cache.padded_tensor(device);
        let (mut x, turn) = self.embed(ids, positions);
        for (block, layer) in self.blocks.iter().zip(&mut cache.layers) {
            x = block.step(x, layer, mask.clone(), turn.as_ref());
        }
        let logits = self.head.forward(self.norm.forward(x));
        let vocab = logits.dims()[2];
        logits.reshape([n, vocab])
    }

    /// Appends `suffixes` (one per row of `cache`, each non-empty) to the rows' cached
    /// tokens and returns the logits `[N, V]` at each row's last new token: the same
    /// logits a prefill of each row's whole context gives, without encoding the cached
    /// part again. The suffixes are left-padded to the longest.
    pub fn extend(&self, cache: &mut KvCache, suffixes: &[&[u32]], device: &Device) -> Tensor<2> {
        let n = suffixes.len();
        let longest = suffixes.iter().map(|s| s.len()).max().unwrap_or(1).max(1);
        let old = cache.columns();
        let mut ids = vec![0i32; n * longest];
        let mut positions = vec![0i32; n * longest];
        for (row, suffix) in suffixes.iter().enumerate() {
            let pad = longest - suffix.len();
            for j in 0..longest {
                let at = row * longest + j;
                let real = j >= pad;
                if real {
                    ids[at] = suffix[j - pad] as i32;
                    positions[at] = self.position(cache.next_position[row] + (j - pad) as i64);
                }
                cache.padded[row].push(!real);
            }
            cache.next_position[row] += suffix.len() as i64;
        }
        // Query `i` sees the cached columns and the new ones up to its own.
        let total = old + longest;
        let ahead: Vec<bool> = (0..longest)
            .flat_map(|i| (0..total).map(move |k| k > old + i))
            .collect();
        let ahead =
            Tensor::<4, Bool>::from_data(TensorData::new(ahead, [1, 1, longest, total]), device)
                .expand([n, 1, longest, total]);
        let mask = ahead.bool_or(cache.padded_tensor(device).expand([n, 1, longest, total]));
        let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [n, longest]), device);
        let (mut x, turn) = self.embed(ids, positions);
        for (block, layer) in self.blocks.iter().zip(&mut cache.layers) {
            x = block.step(x, layer, mask.clone(), turn.as_ref());
        }
        let last = x.slice(s![.., longest - 1..longest, ..]);
        let logits = self.head.forward(self.norm.forward(last));
        let vocab = logits.dims()[2];
        logits.reshape([n, vocab])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits_row(t: Tensor<2>) -> Vec<f32> {
        t.try_into_vec_as::<f32>().expect("read back")
    }

    /// The cached passes (prefill, extension, decode steps) against the training
    /// forward over the whole sequence: the same logits at every fed position.
    fn cached_passes_give_the_forward_logits(positions: PositionKind) {
        let device = Device::flex();
        device.seed(3);
        let config = ModelConfig {
            layers: 2,
            width: 16,
            heads: 2,
            context: 64,
            positions,
        };
        let model = PolicyModel::new(&config, crate::run::trainer::vocab(), &device);
        let ids: Vec<u32> = (0..30).map(|i| 6 + (i * 7) % 40).collect();
        let whole = Tensor::<2, Int>::from_data(
            TensorData::new(ids.iter().map(|&t| t as i32).collect::<Vec<_>>(), [1, 30]),
            &device,
        );
        let full = model.forward(whole);
        let vocab = full.dims()[2];
        let at = |j: usize| {
            logits_row(
                full.clone()
                    .slice(s![0..1, j..j + 1, ..])
                    .reshape([1, vocab]),
            )
        };
        let close = |what: &str, a: &[f32], b: &[f32]| {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 1e-4, "{what}: {x} vs {y}");
            }
        };
        let (mut cache, logits) = model.prefill(&[&ids[..20]], &device);
        close("prefill", &logits_row(logits), &at(19));
        let logits = model.extend(&mut cache, &[&ids[20..27]], &device);
        close("extension", &logits_row(logits), &at(26));
        for (j, &token) in ids.iter().enumerate().skip(27) {
            let logits = model.decode_step(&mut cache, &[token], &[true], &device);
            close(&format!("decode {j}"), &logits_row(logits), &at(j));
        }
    }

    #[test]
    fn cached_passes_with_a_position_table_give_the_forward_logits() {
        cached_passes_give_the_forward_logits(PositionKind::Learned);
    }

    #[test]
    fn cached_passes_with_rotary_positions_give_the_forward_logits() {
        cached_passes_give_the_forward_logits(PositionKind::Rotary);
    }

    #[test]
    fn a_rotary_model_has_no_position_table_and_the_estimate_knows() {
        let mut config = crate::config::TrainConfig::default();
        config.model.positions = PositionKind::Rotary;
        let model = PolicyModel::new(&config.model, crate::run::trainer::vocab(), &Device::flex());
        assert!(model.positions.is_none());
        let counted = burn::module::Module::num_params(&model) as f64;
        let estimated = crate::footprint::estimate(&config.shape()).parameters;
        assert!(
            (estimated - counted).abs() <= 0.01 * counted,
            "{estimated} vs {counted}"
        );
        let learned = crate::footprint::estimate(&crate::config::TrainConfig::default().shape());
        let table = (config.model.context * config.model.width) as f64;
        assert!((learned.parameters - estimated - table).abs() < 0.5);
    }

    #[test]
    fn the_memory_estimate_counts_the_parameters_burn_builds() {
        let config = crate::config::TrainConfig::default();
        let model = PolicyModel::new(&config.model, crate::run::trainer::vocab(), &Device::flex());
        let counted = burn::module::Module::num_params(&model) as f64;
        let estimated = crate::footprint::estimate(&config.shape()).parameters;
        assert!(
            (estimated - counted).abs() <= 0.01 * counted,
            "estimate {estimated} vs burn's count {counted}"
        );
    }
}
