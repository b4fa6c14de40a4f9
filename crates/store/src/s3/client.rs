//! The SDK client of an [`S3Store`](super::S3Store): its credentials
//! (static keys or AWS's default chain), its region and its configuration
//! (no SDK retries, checksums only where required, path-style addressing).

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};

use super::S3Config;

/// The credentials of `config`: its static keys, or else AWS's default
/// credential chain (environment, `AWS_PROFILE` and the shared config and
/// credentials files, web identity (EKS), ECS and EC2 instance roles, SSO),
/// which refreshes temporary credentials before they expire.
pub(super) fn credentials_provider(
    config: &S3Config,
    runtime: &tokio::runtime::Runtime,
) -> aws_sdk_s3::config::SharedCredentialsProvider {
    use aws_sdk_s3::config::SharedCredentialsProvider;
    match (&config.access_key, &config.secret_key) {
        (Some(key), Some(secret)) => SharedCredentialsProvider::new(Credentials::new(
            key.clone(),
            secret.clone(),
            config.session_token.clone(),
            None,
            "gitstow",
        )),
        _ => {
            let chain = runtime.block_on(
                aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                    .region(Region::new(config.region_or_default().to_owned()))
                    .build(),
            );
            SharedCredentialsProvider::new(chain)
        }
    }
}

/// The region of `config`: as given (flag or `AWS_REGION`), else the
/// profile's (`AWS_PROFILE` in the shared config file), else `us-east-1`.
/// (Not the instance metadata service: a probe of it would hold every
/// start off EC2.)
fn region(config: &S3Config, runtime: &tokio::runtime::Runtime) -> Region {
    if let Some(r) = &config.region {
        return Region::new(r.clone());
    }
    let from_profile = runtime.block_on(async {
        use aws_config::meta::region::ProvideRegion;
        aws_config::profile::ProfileFileRegionProvider::builder()
            .build()
            .region()
            .await
    });
    from_profile.unwrap_or_else(|| Region::new(config.region_or_default().to_owned()))
}

/// The SDK client configuration for `config`.
pub(super) fn sdk_config(
    config: &S3Config,
    runtime: &tokio::runtime::Runtime,
    credentials: aws_sdk_s3::config::SharedCredentialsProvider,
) -> aws_sdk_s3::Config {
    let mut builder = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region(config, runtime))
        .credentials_provider(credentials)
        .force_path_style(config.path_style)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        // Retries are ours (see the S3Store docs): conditional puts must not
        // be repeated blindly.
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(config.connect_timeout)
                .read_timeout(config.read_timeout)
                .build(),
        );
    if let Some(endpoint) = &config.endpoint {
        builder = builder.endpoint_url(endpoint);
    }
    builder.build()
}
