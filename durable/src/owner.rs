//! [`Owner`]: who claims a run. Every scheduler draws its own when it is
//! made: 128 random bits, so that no two share one, whatever their hosts
//! and process ids (every replica of a container is PID 1, and a process
//! restarted after a crash may get its predecessor's PID: an owner built
//! from the PID would renew, finish and refuse to take over the crashed
//! one's runs as its own).

/// A scheduler's identity in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    /// The 128 random bits, as 32 hex digits: what claims are checked
    /// against.
    pub(crate) id: String,
    /// A readable name, for people only (`Config::name`).
    pub(crate) name: Option<String>,
    /// 64 more random bits: the key of the PostgreSQL session lock that
    /// says this owner is alive.
    pub(crate) lock: i64,
}

impl Owner {
    /// A new owner, with `name` for display.
    pub(crate) fn new(name: Option<String>) -> Owner {
        let id = uuid::Uuid::new_v4();
        let lock = uuid::Uuid::new_v4().as_u64_pair().0 as i64;
        Owner {
            id: id.simple().to_string(),
            name,
            lock,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_owner_is_new() {
        let owners: std::collections::HashSet<String> =
            (0..10_000).map(|_| Owner::new(None).id).collect();
        assert_eq!(owners.len(), 10_000);
        assert!(owners.iter().all(|id| id.len() == 32));
    }
}
