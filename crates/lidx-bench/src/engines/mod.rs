//! Adapters for lidx's own engines.

pub mod xindex;

use crate::engine::EngineFactory;

/// lidx's engines, in the order reports list them.
pub fn all() -> Vec<Box<dyn EngineFactory>> {
    vec![Box::new(xindex::XINDEX), Box::new(xindex::XINDEX_SEQ)]
}
