//! The coordinator's scheduler (placeholder: being written).
