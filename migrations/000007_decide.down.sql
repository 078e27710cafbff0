DROP TABLE IF EXISTS decision_revision;
DROP TABLE IF EXISTS app_tokens;
DROP TABLE IF EXISTS descriptor_mappings;
