DROP TABLE idp_roles;
DROP TABLE user_identities;
