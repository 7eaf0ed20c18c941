//! The learner's side: the stages that update the policy and what they update it with.
//! The stages: [`sft`] (teacher demonstrations, then [`recovery`], one round of
//! `DAgger`), [`grpo`] (collection, in process or by workers through
//! [`grpo::remote`], group advantages, the clipped update) and [`rejection`]
//! (rejection-sampling SFT). Their parts: [`batching`] (records to padded tensors),
//! [`loss`] (the core's policy loss in burn ops), [`optimizer`] (AdamW, clipping, the
//! schedule) and [`replicas`] (microbatches on every core).

pub mod batching;
pub mod grpo;
pub mod loss;
pub mod optimizer;
pub mod recovery;
pub mod rejection;
pub mod replicas;
pub mod sft;
