//! What a node's lane on the timeline shows at a moment: its role from a status read, or that
//! the observer could not read it.

use crate::api::ServerState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaneState {
    Looking,
    Following,
    Leading,
    Observing,
    /// The observer's read failed or timed out: killed, paused, or cut off.
    Down,
}

impl LaneState {
    pub fn name(self) -> &'static str {
        match self {
            LaneState::Looking => "LOOKING",
            LaneState::Following => "FOLLOWING",
            LaneState::Leading => "LEADING",
            LaneState::Observing => "OBSERVING",
            LaneState::Down => "unreachable/down",
        }
    }
}

impl From<ServerState> for LaneState {
    fn from(s: ServerState) -> Self {
        match s {
            ServerState::Looking => LaneState::Looking,
            ServerState::Following => LaneState::Following,
            ServerState::Leading => LaneState::Leading,
            ServerState::Observing => LaneState::Observing,
        }
    }
}
