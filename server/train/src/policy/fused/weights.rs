//! The policy's parameters as plain row-major `f32` arrays, each with the id of the burn
//! parameter it was read from, so that gradients computed on them go back to burn's
//! optimizer under the right ids ([`Weights::into_gradients`]). The same structure
//! holds the gradients: [`Weights::zeros_like`]. [`Weights::of`] reads them from the
//! burn model (the model knows nothing of the fused passes).

use std::sync::Arc;

use burn::module::{Param, ParamId};
use burn::nn::{LayerNorm, Linear};
use burn::optim::GradientsParams;
use burn::prelude::*;

use crate::policy::model::{self, PolicyModel};
use crate::policy::rotary::Table;

/// One parameter: its burn id, shape and values.
#[derive(Debug, Clone)]
pub struct Array {
    /// The burn parameter's id.
    pub id: ParamId,
    /// Its shape (row-major).
    pub shape: Vec<usize>,
    /// Its values.
    pub values: Vec<f32>,
}

impl Array {
    /// Reads a burn parameter.
    ///
    /// # Errors
    /// When its values cannot be read back from the device.
    pub fn read<const D: usize>(param: &Param<Tensor<D>>) -> anyhow::Result<Self> {
        let tensor = param.val();
        let shape = tensor.dims().to_vec();
        let values = tensor
            .try_into_vec_as::<f32>()
            .map_err(|e| anyhow::anyhow!("reading a parameter for the fused CPU path: {e:?}"))?;
        Ok(Self {
            id: param.id,
            shape,
            values,
        })
    }

    fn zeros_like(&self) -> Self {
        Self {
            id: self.id,
            shape: self.shape.clone(),
            values: vec![0.0; self.values.len()],
        }
    }

    fn register(self, grads: &mut GradientsParams, device: &Device) {
        match self.shape.as_slice() {
            &[a] => grads.register::<1>(
                self.id,
                Tensor::from_data(TensorData::new(self.values, [a]), device),
            ),
            &[a, b] => grads.register::<2>(
                self.id,
                Tensor::from_data(TensorData::new(self.values, [a, b]), device),
            ),
            other => unreachable!("the policy has only vectors and matrices, not {other:?}"),
        }
    }
}

/// A layer norm's scale and shift.
#[derive(Debug, Clone)]
pub struct Norm {
    /// `gamma`, `[d]`.
    pub gamma: Array,
    /// `beta`, `[d]`.
    pub beta: Array,
}

/// A linear layer `y = x W + b`.
#[derive(Debug, Clone)]
pub struct Dense {
    /// `W`, `[d_in, d_out]` (burn's row layout).
    pub weight: Array,
    /// `b`, `[d_out]`.
    pub bias: Array,
}

impl Dense {
    /// Output width.
    pub fn d_out(&self) -> usize {
        self.bias.values.len()
    }
}

/// One transformer block's parameters.
#[derive(Debug, Clone)]
pub struct Block {
    /// The norm before attention.
    pub norm_attention: Norm,
    /// The query/key/value projection, `[d, 3d]`.
    pub qkv: Dense,
    /// The attention output projection, `[d, d]`.
    pub out: Dense,
    /// The norm before the MLP.
    pub norm_mlp: Norm,
    /// The MLP's first layer, `[d, 4d]`.
    pub up: Dense,
    /// The MLP's second layer, `[4d, d]`.
    pub down: Dense,
}

/// Every parameter of the policy (or, from [`Weights::zeros_like`], their gradients).
#[derive(Debug, Clone)]
pub struct Weights {
    /// Token embeddings, `[V, d]`.
    pub tokens: Array,
    /// Position embeddings, `[context, d]`; `None` with rotary positions.
    pub positions: Option<Array>,
    /// With rotary positions, the turns of every position (`None` with a table); shared
    /// with the gradients of [`Weights::zeros_like`], which never read it.
    pub rotary: Option<Arc<Table>>,
    /// Positions the model knows.
    pub context: usize,
    /// The blocks in order.
    pub blocks: Vec<Block>,
    /// The final norm.
    pub norm: Norm,
    /// The output head, `[d, V]`.
    pub head: Dense,
    /// Attention heads per block.
    pub heads: usize,
}

impl Norm {
    fn map(&self, f: &mut impl FnMut(&Array) -> Array) -> Self {
        Self {
            gamma: f(&self.gamma),
            beta: f(&self.beta),
        }
    }
}

impl Dense {
    fn map(&self, f: &mut impl FnMut(&Array) -> Array) -> Self {
        Self {
            weight: f(&self.weight),
            bias: f(&self.bias),
        }
    }
}

impl Block {
    fn map(&self, f: &mut impl FnMut(&Array) -> Array) -> Self {
        Self {
            norm_attention: self.norm_attention.map(f),
            qkv: self.qkv.map(f),
            out: self.out.map(f),
            norm_mlp: self.norm_mlp.map(f),
            up: self.up.map(f),
            down: self.down.map(f),
        }
    }
}

impl Weights {
    /// Model width.
    pub fn width(&self) -> usize {
        self.norm.gamma.values.len()
    }

    /// Vocabulary size.
    pub fn vocab(&self) -> usize {
        self.head.d_out()
    }

    /// Positions the model knows.
    pub fn context(&self) -> usize {
        self.context
    }

    /// The same structure, every value zero: the gradients' accumulator.
    #[must_use]
    pub fn zeros_like(&self) -> Self {
        let mut zero = Array::zeros_like;
        Self {
            tokens: self.tokens.zeros_like(),
            positions: self.positions.as_ref().map(Array::zeros_like),
            rotary: self.rotary.clone(),
            context: self.context,
            blocks: self.blocks.iter().map(|b| b.map(&mut zero)).collect(),
            norm: self.norm.map(&mut zero),
            head: self.head.map(&mut zero),
            heads: self.heads,
        }
    }

    /// Every array, in one fixed order.
    fn into_arrays(self) -> Vec<Array> {
        let mut all = vec![self.tokens];
        all.extend(self.positions);
        for b in self.blocks {
            all.extend([
                b.norm_attention.gamma,
                b.norm_attention.beta,
                b.qkv.weight,
                b.qkv.bias,
                b.out.weight,
                b.out.bias,
                b.norm_mlp.gamma,
                b.norm_mlp.beta,
                b.up.weight,
                b.up.bias,
                b.down.weight,
                b.down.bias,
            ]);
        }
        all.extend([
            self.norm.gamma,
            self.norm.beta,
            self.head.weight,
            self.head.bias,
        ]);
        all
    }

    /// These values as burn gradients on `device` (the device without autodiff), under
    /// the ids of the parameters they were read from.
    pub fn into_gradients(self, device: &Device) -> GradientsParams {
        let mut grads = GradientsParams::new();
        for array in self.into_arrays() {
            array.register(&mut grads, device);
        }
        grads
    }
}

impl Weights {
    /// Every parameter of `model` as a plain array with its id.
    ///
    /// # Errors
    /// When a parameter cannot be read back from its device, or a layer lacks the
    /// shift or bias the fused passes expect.
    pub fn of(model: &PolicyModel) -> anyhow::Result<Self> {
        Ok(Self {
            tokens: Array::read(&model.tokens.weight)?,
            positions: model
                .positions
                .as_ref()
                .map(|table| Array::read(&table.weight))
                .transpose()?,
            rotary: model.positions.is_none().then(|| {
                let (width, heads) = (model.tokens.weight.dims()[1], model.heads());
                Arc::new(Table::new(width / heads, model.context()))
            }),
            context: model.context(),
            blocks: model
                .blocks
                .iter()
                .map(block_arrays)
                .collect::<anyhow::Result<_>>()?,
            norm: norm_arrays(&model.norm)?,
            head: dense_arrays(&model.head)?,
            heads: model.heads(),
        })
    }
}

fn block_arrays(block: &model::Block) -> anyhow::Result<Block> {
    Ok(Block {
        norm_attention: norm_arrays(&block.norm_attention)?,
        qkv: dense_arrays(&block.qkv)?,
        out: dense_arrays(&block.out)?,
        norm_mlp: norm_arrays(&block.norm_mlp)?,
        up: dense_arrays(&block.up)?,
        down: dense_arrays(&block.down)?,
    })
}

fn norm_arrays(norm: &LayerNorm) -> anyhow::Result<Norm> {
    let beta = norm
        .beta
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("the fused CPU path needs layer norms with a shift"))?;
    Ok(Norm {
        gamma: Array::read(&norm.gamma)?,
        beta: Array::read(beta)?,
    })
}

fn dense_arrays(linear: &Linear) -> anyhow::Result<Dense> {
    let bias = linear
        .bias
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("the fused CPU path needs linear layers with a bias"))?;
    Ok(Dense {
        weight: Array::read(&linear.weight)?,
        bias: Array::read(bias)?,
    })
}
