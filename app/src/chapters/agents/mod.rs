//! Chapter: what an agent is, and the harness that runs it.

use super::{Block, Chapter};

pub mod episode;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "agents",
    title: "Agents and the harness",
    summary: "A model, its tools, and the loop that connects them: the unit that is trained is the whole run.",
    blocks: &[
        Block::Text(
            "An agent here is a language model placed in a loop. At each turn it reads what \
             has happened so far, writes an action — a tool call such as running the tests \
             or editing a line — and the harness executes that call and appends the result. \
             The loop stops when the model declares it is done, or when a budget of turns or \
             tokens runs out.",
        ),
        Block::Text(
            "The running example of this notebook is a small code-repair task: a function \
             with one injected bug (a flipped comparison, a wrong starting value, an \
             off-by-one range) and tools to run tests, read and rewrite code, and finish. \
             The reward is 1 if hidden tests pass when the agent finishes, and 0 otherwise. \
             Nothing rewards the intermediate steps; they matter only through the end result.",
        ),
        Block::Text(
            "Reinforcement learning treats the run as the sample. The policy is the model's \
             distribution over the next token given the history $h_t$; a trajectory is the \
             sequence of histories and actions; its return is the final reward. Training \
             raises the probability of the actions in runs that ended well, relative to \
             those that did not. The environment, its tools and its grader are part of the \
             experiment: they define what \"ended well\" means, and the same model can look \
             better or worse under a different harness.",
        ),
        Block::Text(
            "Two endings must be told apart. A run is terminated when the task itself is \
             over (the agent finished, right or wrong); it is truncated when the harness cut \
             it off. A truncated run still has value left that the reward never saw, and an \
             environment fault (a crashed tool) is not the policy's failure. The record of \
             each episode keeps these reasons.",
        ),
        Block::Text(
            "How a tool names what it changes is part of the harness as well. An edit can \
             point at a line by its number, which the model has to read off the numbered \
             listing, or at a piece of text that occurs exactly once in the file, which it \
             has to copy. The small policy trained with this notebook learns the second \
             much more readily from the same demonstrations, so the training recipe gives \
             it text-addressed edits; the figure shows both.",
        ),
        Block::Figure("episode"),
    ],
};
