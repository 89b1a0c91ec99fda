//! The owner's actions on the agent: Donate now, Pause and Resume, with the same choices
//! (ids, words, durations) in the tray menu (`lull-tray`) and the status window
//! (`lull-window`), and the one control request behind each, sent on the agent's socket
//! exactly as `lull donate 1h`, `lull pause tomorrow` or `lull resume` send it.

use agent_core::control::Request;
use agent_core::policy::{DonateSpan, PauseSpan};

/// One choice the owner can pick: its id (the menu item's, the window button's) and words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub id: &'static str,
    pub label: &'static str,
}

/// The ids of the choices.
pub mod id {
    pub const DONATE_1H: &str = "donate-1h";
    pub const DONATE_RETURN: &str = "donate-until-return";
    pub const PAUSE_1H: &str = "pause-1h";
    pub const PAUSE_3H: &str = "pause-3h";
    pub const PAUSE_TOMORROW: &str = "pause-tomorrow";
    pub const PAUSE_RESUMED: &str = "pause-until-resumed";
    pub const RESUME: &str = "resume";
}

/// "Donate now" ▸ these.
pub const DONATE: [Choice; 2] =
    [Choice { id: id::DONATE_1H, label: "For 1 hour" }, Choice { id: id::DONATE_RETURN, label: "Until I return" }];

/// "Pause" ▸ these.
pub const PAUSE: [Choice; 4] = [
    Choice { id: id::PAUSE_1H, label: "For 1 hour" },
    Choice { id: id::PAUSE_3H, label: "For 3 hours" },
    Choice { id: id::PAUSE_TOMORROW, label: "Until tomorrow" },
    Choice { id: id::PAUSE_RESUMED, label: "Until I resume" },
];

/// Ends a pause or an offer to donate now.
pub const RESUME: Choice = Choice { id: id::RESUME, label: "Resume" };

/// The control request behind a choice; `None` for an id that is none of them.
pub fn request_for(choice: &str) -> Option<Request> {
    Some(match choice {
        id::DONATE_1H => Request::Donate { span: DonateSpan::For { secs: 3600 } },
        id::DONATE_RETURN => Request::Donate { span: DonateSpan::UntilReturn },
        id::PAUSE_1H => Request::Pause { span: PauseSpan::For { secs: 3600 } },
        id::PAUSE_3H => Request::Pause { span: PauseSpan::For { secs: 3 * 3600 } },
        id::PAUSE_TOMORROW => Request::Pause { span: PauseSpan::UntilTomorrow },
        id::PAUSE_RESUMED => Request::Pause { span: PauseSpan::UntilResumed },
        id::RESUME => Request::Resume,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_map_to_control_requests() {
        assert_eq!(request_for(id::PAUSE_3H), Some(Request::Pause { span: PauseSpan::For { secs: 10_800 } }));
        assert_eq!(request_for(id::DONATE_RETURN), Some(Request::Donate { span: DonateSpan::UntilReturn }));
        assert_eq!(request_for(id::RESUME), Some(Request::Resume));
        assert_eq!(request_for("quit"), None);
        // Every choice offered has its request.
        for c in DONATE.iter().chain(&PAUSE).chain([&RESUME]) {
            assert!(request_for(c.id).is_some(), "{c:?}");
        }
    }
}
