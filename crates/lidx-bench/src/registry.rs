//! Every engine `lidx bench` can run: lidx's own engines and the peers.
//!
//! A new engine crate plugs in by adding its factory to [`all`].

use lidx_core::{Error, Result};

use crate::engine::EngineFactory;
use crate::{engines, peers};

/// All engine factories, lidx engines first, then the peers.
pub fn all() -> Vec<Box<dyn EngineFactory>> {
    let mut all = engines::all();
    all.extend(peers::all());
    all
}

/// Names of every engine, in [`all`]'s order.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|f| f.info().name).collect()
}

/// The factory called `name`.
pub fn by_name(name: &str) -> Result<Box<dyn EngineFactory>> {
    all()
        .into_iter()
        .find(|f| f.info().name == name)
        .ok_or_else(|| Error::NotFound(format!("engine '{name}' (known: {})", names().join(", "))))
}
