//! Names for the children a policy asks for by prefix (`generateName`). The API server
//! would append five random characters; the host appends five of its own instead,
//! derived from the parent's UID, the prefix and a slot number, and takes the lowest
//! slots whose names the parent has not got (observed, terminating included, or in
//! flight). Every replica names the same way, so a create can land only once per name:
//!
//! A deposed leader's create that a held path delivers after the new leader acted (a
//! buffering middlebox; TCP retransmitting once a partition heals: the write fence let
//! it go before the deadline) asked for a slot that was among the lowest free ones then.
//! The new leader, needing as many children as are missing, takes the lowest free slots
//! of what it sees, which still include that one: whatever the old leader made since
//! only fills slots, and whatever was deleted since frees slots and adds as many to
//! make. So the late create meets the new leader's child of that name and fails
//! (`AlreadyExists`) instead of adding one. With server-generated names it added one:
//! 11 pods of 10 in 2 of 3 runs of a path held for 6 s (`fencing-stalled`, 2026-11-26).
//! The same holds within one replica for a create whose answer was lost: asked again,
//! it meets itself.
//!
//! The decision is the policy's and stays a prefix (shadows and replays compare
//! prefixes); only the write names the child.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use super::keys::ChildKey;
use super::plan::Child;

/// The characters the API server's `generateName` draws from
/// (`k8s.io/apimachinery/pkg/util/rand`): no vowels, so no words; no 0, 1 or 3.
const ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
const SUFFIX: usize = 5;

/// The name of slot `slot` of the children `parent_uid` asks for with `prefix`.
pub fn name(prefix: &str, parent_uid: &str, slot: u32) -> String {
    let digest = Sha256::new()
        .chain_update(parent_uid.as_bytes())
        .chain_update([0])
        .chain_update(prefix.as_bytes())
        .chain_update([0])
        .chain_update(slot.to_be_bytes())
        .finalize();
    let mut n = u64::from_be_bytes(digest[..8].try_into().unwrap_or_default());
    let mut out = String::with_capacity(prefix.len() + SUFFIX);
    out.push_str(prefix);
    for _ in 0..SUFFIX {
        out.push(ALPHABET[(n % 27) as usize] as char);
        n /= 27;
    }
    out
}

/// Names every child of `creates` that has only a prefix: each the lowest slot of its
/// prefix whose name is none of `taken` (the parent's children, observed or in flight)
/// nor one given here before.
pub fn name_by_slot(creates: &mut [Child], parent_uid: &str, taken: impl IntoIterator<Item = ChildKey>) {
    let mut taken: HashSet<ChildKey> = taken.into_iter().collect();
    for child in creates.iter_mut().filter(|c| c.object.metadata.name.is_none()) {
        let Some(prefix) = child.object.metadata.generate_name.clone() else { continue };
        let key = child.key();
        let named = (0..)
            .map(|slot| ChildKey { name: name(&prefix, parent_uid, slot), ..key.clone() })
            .find(|k| !taken.contains(k))
            .unwrap_or(key);
        child.object.metadata.name = Some(named.name.clone());
        taken.insert(named);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ApiResource, DynamicObject};
    use proptest::prelude::*;

    use super::*;

    fn pod(prefix: &str) -> Child {
        let resource = ApiResource::erase::<Pod>(&());
        let mut object = DynamicObject::new("", &resource).within("ns");
        object.metadata.name = None;
        object.metadata.generate_name = Some(prefix.into());
        Child { resource: Arc::new(resource), object }
    }

    fn key(name: &str) -> ChildKey {
        ChildKey::of("v1", "Pod", "ns", name)
    }

    fn names(creates: &[Child]) -> Vec<String> {
        creates.iter().map(|c| c.object.metadata.name.clone().unwrap_or_default()).collect()
    }

    #[test]
    fn a_name_looks_generated_and_is_the_same_everywhere() {
        let a = name("web-", "7b1c0a52-uid", 0);
        assert_eq!(a.len(), "web-".len() + SUFFIX);
        assert!(a.starts_with("web-") && a[4..].bytes().all(|b| ALPHABET.contains(&b)), "{a}");
        assert_eq!(a, name("web-", "7b1c0a52-uid", 0), "a pure function of its inputs");
        assert_ne!(a, name("web-", "7b1c0a52-uid", 1));
        assert_ne!(a, name("web-", "another-uid", 0), "another parent of the same name, another name");
        // Fixed across versions and replicas: a rolling upgrade must not rename slots.
        assert_eq!(name("web-", "uid", 0), "web-wrjph");
    }

    #[test]
    fn the_lowest_free_slots_are_taken_and_named_children_left_alone() {
        let uid = "uid";
        let mut named = pod("web-");
        named.object.metadata.name = Some("exact".into());
        let mut creates = vec![pod("web-"), named, pod("web-"), pod("api-")];
        // Slot 0 of web- is observed, slot 2 in flight.
        let taken = [key(&name("web-", uid, 0)), key(&name("web-", uid, 2))];
        name_by_slot(&mut creates, uid, taken);
        assert_eq!(
            names(&creates),
            vec![name("web-", uid, 1), "exact".into(), name("web-", uid, 3), name("api-", uid, 0)]
        );
    }

    proptest! {
        /// What makes a late create fail: a slot the old leader named (the lowest free
        /// ones of what it saw) is named again by a new leader that sees anything the old
        /// one made since (filling slots) and anything deleted since (freeing slots, each
        /// one more to make), while the late create is not seen.
        #[test]
        fn a_slot_named_before_is_named_again_by_whoever_still_misses_it(
            had in proptest::collection::btree_set(0u32..30, 0..20),
            wanted in 0usize..20,
            made_mask in any::<u32>(),
            deleted_mask in any::<u32>(),
            late_pick in any::<prop::sample::Index>(),
        ) {
            let uid = "uid";
            let keys = |slots: &mut dyn Iterator<Item = u32>| slots.map(|s| key(&name("web-", uid, s))).collect::<Vec<_>>();
            let missing = wanted.saturating_sub(had.len());
            prop_assume!(missing > 0);
            let mut old = vec![pod("web-"); missing];
            name_by_slot(&mut old, uid, keys(&mut had.iter().copied()));
            let old_names = names(&old);
            // The late one: not seen by the new leader. Some others landed and were seen.
            let late = late_pick.index(old_names.len());
            let made: Vec<String> = old_names.iter().enumerate()
                .filter(|(i, _)| *i != late && made_mask & (1 << (i % 32)) != 0)
                .map(|(_, n)| n.clone()).collect();
            let deleted: Vec<u32> = had.iter().copied().filter(|s| deleted_mask & (1 << (s % 32)) != 0).collect();
            let seen: Vec<ChildKey> = keys(&mut had.iter().copied().filter(|s| !deleted.contains(s)))
                .into_iter()
                .chain(made.iter().map(|n| key(n)))
                .collect();
            let mut new = vec![pod("web-"); wanted - seen.len()];
            name_by_slot(&mut new, uid, seen);
            prop_assert!(names(&new).contains(&old_names[late]), "the late create's name is named again");
        }
    }
}
