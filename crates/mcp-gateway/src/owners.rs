//! How much of a bounded store each principal holds, so one caller's share can be capped and
//! its churn cannot push everyone else's entries out.

use std::collections::HashMap;
use std::sync::Arc;

/// Entries per principal (a principal with none is not kept).
#[derive(Debug, Default)]
pub(crate) struct OwnerCounts(HashMap<Arc<str>, usize>);

impl OwnerCounts {
    /// How many entries `owner` holds.
    pub(crate) fn get(&self, owner: &str) -> usize {
        self.0.get(owner).copied().unwrap_or(0)
    }

    /// One more entry of `owner`'s; gives its name as kept here, for the store to share.
    pub(crate) fn add(&mut self, owner: &str) -> Arc<str> {
        if let Some((known, n)) = self.0.get_key_value(owner) {
            let known = Arc::clone(known);
            self.0.insert(Arc::clone(&known), n.saturating_add(1));
            return known;
        }
        let owner: Arc<str> = Arc::from(owner);
        self.0.insert(Arc::clone(&owner), 1);
        owner
    }

    /// One entry of `owner`'s fewer; `owner` is forgotten at none.
    pub(crate) fn remove(&mut self, owner: &str) {
        if let Some(n) = self.0.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.0.remove(owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rise_fall_and_are_forgotten_at_zero() {
        let mut counts = OwnerCounts::default();
        let first = counts.add("alice");
        let second = counts.add("alice");
        assert!(Arc::ptr_eq(&first, &second));
        counts.add("bob");
        assert_eq!((counts.get("alice"), counts.get("bob"), counts.get("carol")), (2, 1, 0));
        counts.remove("alice");
        counts.remove("alice");
        counts.remove("alice");
        counts.remove("carol");
        assert_eq!((counts.get("alice"), counts.0.len()), (0, 1));
    }
}
