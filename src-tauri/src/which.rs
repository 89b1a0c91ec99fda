//! The windows the owner can open, named alike in `lull-tray` (which asks for them) and
//! `lull-window` (which shows them): the names go over the pipe between the two.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Status,
    Settings,
}

impl Which {
    // lull-tray names windows only in its GUI, Linux-only so far; lull-window always.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn label(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Settings => "settings",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "status" => Some(Self::Status),
            "settings" => Some(Self::Settings),
            _ => None,
        }
    }
}
