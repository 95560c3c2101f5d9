// Package config is sparkpulse's configuration: the file, the environment
// and the command's flags, laid over each other once and validated into a
// Plan that the service starts from and `check` describes.
//
// The layers, each over the one before:
//
//  1. the defaults: without a config file, the built-in Spark mapping on
//     TCP and UDP port 2003; every unset key keeps its package's default;
//  2. the config file (Overrides.Config, else SPARKPULSE_CONFIG): sparkpulse
//     TOML, or an influxdb.conf whose [[graphite]] blocks are used; its
//     ${VAR} and ${VAR:-default} are replaced before it is decoded;
//  3. the environment: SPARKPULSE_<SECTION>_<KEY> for every key, a block's
//     with its position (SPARKPULSE_GRAPHITE_2_DATABASE); secrets are read
//     from their variables before their -file keys and the file;
//  4. the flags, as the values of Overrides.
//
// Load validates everything once, before any socket is opened: it reads
// the secret and certificate files and compiles the templates, and opens
// nothing. All problems are reported together, each starting with where
// its value came from: file:line:col (with the ${VAR}s of that line), the
// environment variable and its value (credentials in URLs hidden), or the
// flag. These messages are part of the documented behaviour
// (docs/configuration.md).
package config
