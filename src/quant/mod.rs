//! Block formats: scalar reference dequantization and activation quantizers.
