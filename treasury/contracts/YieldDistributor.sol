// SPDX-License-Identifier: MIT
pragma solidity ^0.8.37;

interface IERC20Transfer {
    function transfer(address to, uint256 amount) external returns (bool);
}

/// @title YieldDistributor
/// @notice Pays weekly yield claims in one token (c0) against merkle roots the operator
/// posts: OpenZeppelin StandardMerkleTree leaves `keccak256(bytes.concat(keccak256(
/// abi.encode(index, account, amount))))`, proofs checked with sorted-pair hashing as
/// OpenZeppelin's MerkleProof does. Each leaf pays once.
contract YieldDistributor {
    address public immutable token;
    address public operator;
    mapping(uint256 => bytes32) public roots;
    mapping(uint256 => mapping(uint256 => uint256)) private _claimed; // period => word => bits

    event RootPosted(uint256 indexed periodId, bytes32 root);
    event Claimed(uint256 indexed periodId, uint256 index, address indexed account, uint256 amount);
    event OperatorChanged(address operator);

    constructor(address token_, address operator_) {
        token = token_;
        operator = operator_;
    }

    modifier onlyOperator() {
        require(msg.sender == operator, "YieldDistributor: not the operator");
        _;
    }

    function setOperator(address operator_) external onlyOperator {
        operator = operator_;
        emit OperatorChanged(operator_);
    }

    /// @notice A period's root, posted once and never changed.
    function postRoot(uint256 periodId, bytes32 root) external onlyOperator {
        require(root != bytes32(0), "YieldDistributor: zero root");
        require(roots[periodId] == bytes32(0), "YieldDistributor: root already posted");
        roots[periodId] = root;
        emit RootPosted(periodId, root);
    }

    function isClaimed(uint256 periodId, uint256 index) public view returns (bool) {
        return _claimed[periodId][index / 256] & (uint256(1) << (index % 256)) != 0;
    }

    function claim(
        uint256 periodId,
        uint256 index,
        address account,
        uint256 amount,
        bytes32[] calldata proof
    ) external {
        bytes32 root = roots[periodId];
        require(root != bytes32(0), "YieldDistributor: unknown period");
        require(!isClaimed(periodId, index), "YieldDistributor: already claimed");
        bytes32 leaf = keccak256(bytes.concat(keccak256(abi.encode(index, account, amount))));
        require(_root(proof, leaf) == root, "YieldDistributor: invalid proof");
        _claimed[periodId][index / 256] |= uint256(1) << (index % 256);
        require(IERC20Transfer(token).transfer(account, amount), "YieldDistributor: transfer failed");
        emit Claimed(periodId, index, account, amount);
    }

    function _root(bytes32[] calldata proof, bytes32 leaf) private pure returns (bytes32 hash) {
        hash = leaf;
        for (uint256 i = 0; i < proof.length; i++) {
            bytes32 other = proof[i];
            hash = hash < other
                ? keccak256(abi.encodePacked(hash, other))
                : keccak256(abi.encodePacked(other, hash));
        }
    }
}
