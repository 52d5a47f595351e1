pub mod client;
pub mod dist_mutex;
