//! Acting as a policy's service account. A ReconcilePolicy may name one of its namespace
//! (`spec.serviceAccountName`; the operator's `--default-service-account` names one for
//! every ReconcilePolicy that names none): the host then writes that policy's children
//! impersonating it, so the policy may do exactly what the service account may, and the
//! API server's RBAC (not the operator's wider one) answers for every write. What the
//! policy reads comes from the operator's shared caches (one watch per kind, whatever
//! the number of tenants); that the service account may read it is checked when the
//! policy loads (`access::resolve`).
//!
//! One client per service account, made the first time a policy acts as it and kept:
//! each has its own connections, and only writes go through it.

use std::collections::HashMap;
use std::fmt;

use kube::Client;
use parking_lot::Mutex;

use super::client::Maker;

/// A service account, which a policy of its namespace acts as.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccount {
    /// The user name the API server knows it by.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

impl fmt::Display for ServiceAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("this operator cannot act as a service account (built without a kubeconfig)")]
    Unavailable,
    #[error("cannot make a client acting as {account}: {source}")]
    Client {
        account: ServiceAccount,
        #[source]
        source: kube::Error,
    },
}

/// The clients acting as service accounts.
#[derive(Default)]
pub struct Identities {
    maker: Option<Maker>,
    clients: Mutex<HashMap<ServiceAccount, Client>>,
}

impl Identities {
    pub fn new(maker: Maker) -> Self {
        Identities { maker: Some(maker), clients: Mutex::default() }
    }

    /// The client acting as `account`.
    pub fn client(&self, account: &ServiceAccount) -> Result<Client, IdentityError> {
        let mut clients = self.clients.lock();
        if let Some(c) = clients.get(account) {
            return Ok(c.clone());
        }
        let maker = self.maker.as_ref().ok_or(IdentityError::Unavailable)?;
        let client = maker
            .client(Some(&account.username()))
            .map_err(|source| IdentityError::Client { account: account.clone(), source })?;
        clients.insert(account.clone(), client.clone());
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_is_known_by_its_user_name() {
        let sa = ServiceAccount { namespace: "team-a".into(), name: "deployer".into() };
        assert_eq!(sa.username(), "system:serviceaccount:team-a:deployer");
        assert_eq!(sa.to_string(), "team-a/deployer");
    }

    #[test]
    fn without_a_maker_no_service_account_is_acted_as() {
        let sa = ServiceAccount { namespace: "team-a".into(), name: "deployer".into() };
        assert!(matches!(Identities::default().client(&sa), Err(IdentityError::Unavailable)));
    }
}
