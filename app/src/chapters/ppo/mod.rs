//! Chapter: PPO's clipped objective, Clip-Higher, and (next) advantage estimation.

use super::{Block, Chapter};

pub mod clip;
pub mod gae;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "ppo",
    title: "PPO clipping and advantage estimation",
    summary: "How a clipped ratio keeps reused samples from pushing the policy too far, and why the upper width matters for rare tokens.",
    blocks: &[
        Block::Text(
            "Once a batch is collected, it is used for several gradient steps. After the \
             first step the policy being trained, $\\pi_\\theta$, is no longer the snapshot \
             $\\pi_{\\mathrm{old}}$ that produced the tokens, and their ratio measures how far \
             it has moved on each token:",
        ),
        Block::Display(
            r"\rho_t = \frac{\pi_\theta(a_t \mid h_t)}{\pi_{\mathrm{old}}(a_t \mid h_t)}",
        ),
        Block::Text(
            "PPO maximises the ratio times the advantage, but takes the smaller of that and a \
             copy whose ratio is clipped into a band around 1:",
        ),
        Block::Display(
            r"L(\rho) = \min\left( \rho \hat A,\; \clip(\rho, 1 - \varepsilon_{\mathrm{low}}, 1 + \varepsilon_{\mathrm{high}}) \hat A \right)",
        ),
        Block::Text(
            "The minimum makes the clip one-sided. For a good token ($\\hat A > 0$) the \
             objective stops rising once $\\rho > 1 + \\varepsilon_{\\mathrm{high}}$: the \
             gradient there is exactly zero, so the token is not pushed further this round. \
             For a bad token ($\\hat A < 0$) it stops falling once \
             $\\rho < 1 - \\varepsilon_{\\mathrm{low}}$. Moves in the harmful direction are \
             never clipped away, so the objective stays pessimistic.",
        ),
        Block::Heading("Clip-Higher"),
        Block::Text(
            "The band is relative. A token the old policy gave probability 0.5 may rise to \
             0.6 before the clip bites; a token at 0.01 may only reach 0.012. Rare tokens — \
             often the exploratory ones — hardly move. DAPO therefore decouples the widths \
             and widens only the upper one (0.28 against 0.2), which leaves the protection \
             against collapsing probabilities unchanged.",
        ),
        Block::Figure("clip"),
        Block::Heading("Advantages from a value estimate"),
        Block::Text(
            "PPO usually gets its advantages from a learned value $V$ of each state. The \
             one-step error $\\delta_t = r_t + \\gamma V(s_{t+1}) - V(s_t)$ says how much \
             better a step went than expected; GAE adds these errors up with a decay \
             $\\lambda$:",
        ),
        Block::Display(r"\hat A_t = \sum_{l \ge 0} (\gamma \lambda)^l \delta_{t+l}"),
        Block::Text(
            "With $\\lambda = 1$ this is the observed return minus the value — unbiased \
             but noisy; with $\\lambda = 0$ only the next value is trusted — steady but \
             as wrong as $V$ is. How the trajectory ended matters: after a true terminal \
             state nothing follows, so $V(s_T) = 0$; after a cut-off by a turn or token \
             limit, the task was still open and the last value must be bootstrapped.",
        ),
        Block::Figure("gae"),
    ],
};
