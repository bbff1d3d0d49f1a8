//! [`Memory`]: objects held in process memory, for tests and `mem://`.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::ops::Range;

use bytes::Bytes;
use parking_lot::RwLock;

use super::{Storage, check_object_name, check_range};
use crate::{Error, Result};

/// An in-memory [`Storage`]: nothing is durable, reads are zero-copy slices
/// of the stored objects.
#[derive(Debug, Default)]
pub struct Memory {
    objects: RwLock<BTreeMap<String, Bytes>>,
}

impl Memory {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn get(&self, object: &str) -> Result<Bytes> {
        check_object_name(object)?;
        self.objects
            .read()
            .get(object)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("object {object:?} in mem://")))
    }
}

impl Storage for Memory {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        let data = self.get(object)?;
        check_range(object, &range, data.len() as u64)?;
        // check_range bounds both ends by the length, which is a usize.
        Ok(data.slice(range.start as usize..range.end as usize))
    }

    fn read_all(&self, object: &str) -> Result<Bytes> {
        self.get(object)
    }

    fn len(&self, object: &str) -> Result<u64> {
        Ok(self.get(object)?.len() as u64)
    }

    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        check_object_name(object)?;
        self.objects
            .write()
            .insert(object.to_owned(), Bytes::copy_from_slice(data));
        Ok(())
    }

    fn delete(&self, object: &str) -> Result<()> {
        check_object_name(object)?;
        self.objects.write().remove(object);
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let objects = self.objects.read();
        Ok(objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .map(|(name, _)| name)
            .take_while(|name| name.starts_with(prefix))
            .cloned()
            .collect())
    }

    fn describe(&self) -> String {
        "mem://".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_slices_of_the_stored_object() {
        let store = Memory::new();
        store.write("a", b"hello world").unwrap();
        let all = store.read_all("a").unwrap();
        let part = store.read("a", 6..11).unwrap();
        assert_eq!(&part[..], b"world");
        // Zero-copy: the slice points into the stored buffer.
        assert_eq!(part.as_ptr(), all[6..].as_ptr());
    }

    #[test]
    fn list_is_prefix_filtered_and_sorted() {
        let store = Memory::new();
        for name in ["b/2", "a", "b/1", "c", "ba"] {
            store.write(name, name.as_bytes()).unwrap();
        }
        assert_eq!(store.list("b").unwrap(), ["b/1", "b/2", "ba"]);
        assert_eq!(store.list("b/").unwrap(), ["b/1", "b/2"]);
        assert_eq!(store.list("").unwrap().len(), 5);
        assert!(store.list("z").unwrap().is_empty());
    }

    #[test]
    fn missing_and_truncated_are_reported() {
        let store = Memory::new();
        assert!(matches!(store.read("x", 0..1), Err(Error::NotFound(_))));
        store.write("x", b"abc").unwrap();
        assert!(matches!(
            store.read("x", 1..4),
            Err(Error::Truncated {
                expected: 4,
                found: 3,
                ..
            })
        ));
        assert!(matches!(
            store.write("../x", b""),
            Err(Error::InvalidArgument(_))
        ));
    }
}
